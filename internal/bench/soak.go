package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/queue"
)

// SoakConfig is one soak: no-op WorkItems started at a steady rate (open
// loop: a slowdown shows as items in flight, lateness and latency, not as
// a lower rate) over a sequence of Missions, each in a Group of its own
// that is finished (submitted and approved) once its items are verified,
// while the processes' and stores' resources are read at every interval.
type SoakConfig struct {
	// Duration is how long items are started; 0 only with StopAfterGroups.
	Duration time.Duration
	// Rate is the items started a second, on a fixed schedule.
	Rate float64
	// ItemsPerGroup are the WorkItems of each Mission.
	ItemsPerGroup int
	// Groups are the Missions running at once; items go round robin.
	Groups  int
	Workers int // runtime.Workers, each with its own store
	Slots   int // execution slots per worker
	Fsync   bool
	// Dir keeps the stores; "" uses a temporary directory removed after.
	Dir         string
	ItemTimeout time.Duration // default DefaultItemTimeout
	// Interval is how often the resources are read and reported.
	Interval time.Duration
	// Warmup is left out of the growth after it (Growth.PerHour).
	Warmup time.Duration
	Logger *slog.Logger
	Remote *Remote
	Tune   *Tuning // see Config.Tune
	// StopAfterGroups, when set, stops starting items once that many
	// Missions got all theirs (counts, for tests), Duration or not.
	StopAfterGroups int
	// MarkEveryGroups, when set, pauses each time that many more Missions
	// got all their items: it waits for them to be finished and the
	// workers to settle, and reads a "mark" sample. Each is a multiple of
	// Groups.
	MarkEveryGroups int
	// SettleFinished makes every settle (each mark, the end) also wait
	// until each finished Mission's Group is archived and released by an
	// embedded authority and forgotten by every worker: set it with a Tune
	// that archives and forgets at once (ArchiveAfter, ForgetGrace), so a
	// reading holds only what finished Missions leave for good.
	SettleFinished bool
	// OnSample is given every reading as it is taken (the final one too).
	OnSample func(Sample)
	// HeapProfileDir, when set, gets a heap profile with every reading
	// (heap-<n>-<seconds>s.pb.gz, n counting the readings from 0, after the
	// reading's forced collection), to
	// diff with go tool pprof -base; the profile then samples every
	// HeapProfileRate bytes allocated instead of the runtime's 512 KiB.
	HeapProfileDir string
}

// HeapProfileRate is runtime.MemProfileRate while a soak writes heap
// profiles: fine enough to see a map that grows by a few KiB a Mission.
const HeapProfileRate = 8 << 10

// Check reports the first bad field of c.
func (c SoakConfig) Check() error {
	switch {
	case c.Duration < 0 || c.Duration == 0 && c.StopAfterGroups == 0:
		return fmt.Errorf("--duration must be positive, not %s", c.Duration)
	case !(c.Rate > 0):
		return fmt.Errorf("--rate must be positive, not %g", c.Rate)
	case c.ItemsPerGroup < 1:
		return fmt.Errorf("--items-per-group must be at least 1, not %d", c.ItemsPerGroup)
	case c.Groups < 1:
		return fmt.Errorf("--groups must be at least 1, not %d", c.Groups)
	case c.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, not %d", c.Workers)
	case c.Slots < 1:
		return fmt.Errorf("--slots must be at least 1, not %d", c.Slots)
	case c.Interval <= 0:
		return fmt.Errorf("--interval must be positive, not %s", c.Interval)
	case c.Warmup < 0 || c.Duration > 0 && c.Warmup >= c.Duration:
		return fmt.Errorf("--warmup %s must be at least 0 and shorter than --duration %s", c.Warmup, c.Duration)
	case c.StopAfterGroups < 0 || c.StopAfterGroups%c.Groups != 0:
		return fmt.Errorf("stop after %d Missions: not a multiple of --groups %d", c.StopAfterGroups, c.Groups)
	case c.MarkEveryGroups < 0 || c.MarkEveryGroups%c.Groups != 0:
		return fmt.Errorf("a mark every %d Missions: not a multiple of --groups %d", c.MarkEveryGroups, c.Groups)
	}
	if c.Remote != nil {
		return c.Remote.check(c.Workers)
	}
	return nil
}

// Sample is one reading of a soak (docs/shapes.md, "mwp-worker bench
// --duration").
type Sample struct {
	// Kind is "start" (before the first item), "interval", "mark" (see
	// SoakConfig.MarkEveryGroups) or "final" (after the last item, every
	// Mission that got items finished).
	Kind string `json:"kind"`
	// Seconds since the first item was due.
	Seconds   float64        `json:"seconds"`
	Items     SoakItems      `json:"items"`
	Groups    SoakGroups     `json:"groups"`
	Process   Usage          `json:"process"` // this process
	Authority AuthorityUsage `json:"authority"`
	Workers   WorkersUsage   `json:"workers"`
	// The final sample only: the run, the growth and what was not measured.
	Run    *SoakRun `json:"run,omitempty"`
	Growth *Growth  `json:"growth,omitempty"`
	Notes  []string `json:"notes,omitempty"`
}

// SoakItems counts the items.
type SoakItems struct {
	Started   int `json:"started"`
	Completed int `json:"completed"` // verified
	InFlight  int `json:"inFlight"`
	// MaxLateMs is how far behind its schedule the latest-started item
	// since the previous reading started (items in flight are capped at
	// MaxLanes; the schedule does not wait for a slow authority).
	MaxLateMs float64 `json:"maxLateMs"`
	// EndToEndMs are the latencies of the items completed since the
	// previous reading, authorize to verified.
	EndToEndMs Latency `json:"endToEndMs"`
}

// SoakGroups counts the Missions (one Group each).
type SoakGroups struct {
	Finished int `json:"finished"` // approved
	Open     int `json:"open"`     // opened and not finished (one ahead per running Mission)
}

// SoakRun is what the soak was asked.
type SoakRun struct {
	Authority     string  `json:"authority"`
	Rate          float64 `json:"rate"`
	ItemsPerGroup int     `json:"itemsPerGroup"`
	Groups        int     `json:"groups"`
	Workers       int     `json:"workers"`
	Slots         int     `json:"slots"`
	Fsync         bool    `json:"fsync"`
	Seconds       float64 `json:"seconds"`
	IntervalSecs  float64 `json:"intervalSeconds"`
}

// Soak sets up, runs the soak and returns its final reading.
func Soak(ctx context.Context, cfg SoakConfig) (*Sample, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.ItemTimeout <= 0 {
		cfg.ItemTimeout = DefaultItemTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, cleanup, err := storesDir(cfg.Dir, "mwp-soak-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if cfg.HeapProfileDir != "" {
		if err := os.MkdirAll(cfg.HeapProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("heap profiles: %w", err)
		}
		goruntime.MemProfileRate = HeapProfileRate
	}
	// No Group at set-up: each Mission opens its own as it comes.
	r, err := setup(ctx, Config{Lanes: MaxLanes, Workers: cfg.Workers, Slots: cfg.Slots, Fsync: cfg.Fsync, ItemTimeout: cfg.ItemTimeout,
		Logger: cfg.Logger, Remote: cfg.Remote, Tune: cfg.Tune}, dir)
	if err != nil {
		if r != nil {
			err = errors.Join(err, r.close())
		}
		return nil, fmt.Errorf("setup: %w", err)
	}
	s := &soak{r: r, cfg: cfg, tr: newSoakTracker(), sem: make(chan struct{}, MaxLanes), begun: make(chan struct{})}
	final, err := s.run(ctx)
	if cerr := r.close(); err == nil && cerr != nil {
		err = fmt.Errorf("shutdown: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return final, nil
}

// soak is one running soak.
type soak struct {
	r   *rig
	cfg SoakConfig
	tr  *tracker
	sem chan struct{} // items in flight

	start     time.Time     // set before begun closes
	begun     chan struct{} // closed once the start reading is taken
	started   atomic.Int64
	completed atomic.Int64
	items     sync.WaitGroup // items in flight
	closers   sync.WaitGroup // Missions being finished
	opens     sync.WaitGroup // Groups being opened ahead

	cancel context.CancelFunc

	mu       sync.Mutex
	opened   int
	finished int
	done     []string        // the finished Groups
	late     time.Duration   // the most an item started late since the last reading
	lat      []time.Duration // items completed since the last reading
	samples  []Sample        // taken while it runs
	profiles int             // heap profiles written (read: one reading at a time)
	sampling sync.Mutex      // one reading at a time, reported in order
}

// soakGroup is one Mission's Group.
type soakGroup struct {
	id    string
	n     int            // items given so far
	items sync.WaitGroup // its items in flight
	stop  context.CancelFunc
	done  chan struct{} // its follower returned
}

// ahead is a Group being opened before it is needed.
type ahead struct {
	done chan struct{}
	g    *soakGroup
	err  error
}

func (s *soak) fail(err error) {
	s.tr.fail(err)
	s.cancel()
}

func (s *soak) run(parent context.Context) (*Sample, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	s.cancel = cancel
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	dispatched := make(chan error, 1)
	go func() { dispatched <- s.dispatch(ctx) }()
	go func() {
		defer close(sampled)
		select {
		case <-s.begun:
		case <-stopSampling:
			return
		case <-ctx.Done():
			return
		}
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := s.sample(ctx, "interval"); err != nil {
					s.fail(err)
				}
			case <-stopSampling:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	err := <-dispatched
	close(stopSampling)
	<-sampled
	if perr := parent.Err(); perr != nil {
		return nil, fmt.Errorf("stopped (%w) with %d items verified", perr, s.completed.Load())
	}
	if ferr := s.tr.err(); ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	final, err := s.read(ctx, "final")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	g := growth(append(s.samples, final), s.cfg.Warmup.Seconds())
	s.mu.Unlock()
	final.Growth = &g
	final.Run = &SoakRun{Authority: s.r.auth.name(), Rate: s.cfg.Rate, ItemsPerGroup: s.cfg.ItemsPerGroup, Groups: s.cfg.Groups,
		Workers: s.cfg.Workers, Slots: s.cfg.Slots, Fsync: s.cfg.Fsync, Seconds: final.Seconds, IntervalSecs: s.cfg.Interval.Seconds()}
	final.Notes = s.notes(final)
	if s.cfg.OnSample != nil {
		s.cfg.OnSample(final)
	}
	return &final, nil
}

// dispatch starts the items on their schedule, Mission after Mission,
// until the duration or the Missions asked are done, then finishes every
// Mission that got items and waits for all of it.
func (s *soak) dispatch(ctx context.Context) error {
	type stream struct {
		cur  *soakGroup
		next *ahead
	}
	streams := make([]stream, s.cfg.Groups)
	for i := range streams {
		streams[i].next = s.openAhead(ctx)
	}
	// finishAll starts finishing every stream's Mission that got items.
	finishAll := func() {
		for i := range streams {
			if g := streams[i].cur; g != nil {
				s.closers.Add(1)
				go s.finish(ctx, g)
				streams[i].cur = nil
			}
		}
	}
	defer func() {
		finishAll()
		s.items.Wait()
		s.closers.Wait()
		s.opens.Wait()
	}()
	n := s.cfg.ItemsPerGroup
	for i := range streams {
		<-streams[i].next.done
	}
	// The "start" reading: every worker set up, the first Groups open.
	s.start = time.Now()
	if err := s.sample(ctx, "start"); err != nil {
		return err
	}
	close(s.begun)
	paused := time.Since(s.start) // readings that wait pause the schedule
	for k := 0; ; k++ {
		if s.cfg.StopAfterGroups > 0 && k == s.cfg.StopAfterGroups*n {
			return nil
		}
		if m := s.cfg.MarkEveryGroups; m > 0 && k > 0 && k%(m*n) == 0 {
			at := time.Now()
			finishAll()
			s.items.Wait()
			s.closers.Wait()
			s.opens.Wait()
			if err := s.settle(ctx); err != nil {
				return err
			}
			if err := s.sample(ctx, "mark"); err != nil {
				return err
			}
			paused += time.Since(at)
		}
		due := s.start.Add(paused + time.Duration(float64(k)*float64(time.Second)/s.cfg.Rate))
		if s.cfg.Duration > 0 && due.Sub(s.start)-paused >= s.cfg.Duration {
			return nil
		}
		if err := sleepUntil(ctx, due); err != nil {
			return nil // failed or stopped: run says which
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if late := time.Since(due); late > 0 {
			s.mu.Lock()
			s.late = max(s.late, late)
			s.mu.Unlock()
		}
		st := &streams[k%len(streams)]
		if st.cur == nil || st.cur.n == n {
			if st.cur != nil {
				s.closers.Add(1)
				go s.finish(ctx, st.cur)
			}
			<-st.next.done
			if st.next.err != nil {
				<-s.sem
				return st.next.err
			}
			st.cur, st.next = st.next.g, s.openAhead(ctx)
		}
		g := st.cur
		g.n++
		g.items.Add(1)
		s.items.Add(1)
		s.started.Add(1)
		go s.item(ctx, g, k)
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openAhead opens the next Group in the background.
func (s *soak) openAhead(ctx context.Context) *ahead {
	a := &ahead{done: make(chan struct{})}
	s.opens.Add(1)
	go func() {
		defer s.opens.Done()
		defer close(a.done)
		a.g, a.err = s.open(ctx)
	}()
	return a
}

// open creates the next Mission's Group, follows it and has every
// worker subscribe to it.
func (s *soak) open(ctx context.Context) (*soakGroup, error) {
	s.mu.Lock()
	n := s.opened
	s.opened++
	s.mu.Unlock()
	id := s.r.auth.groupID(n)
	if err := s.r.auth.open(ctx, id, s.r.workers); err != nil {
		return nil, err
	}
	fctx, stop := context.WithCancel(ctx)
	g := &soakGroup{id: id, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		if err := s.r.auth.follow(fctx, id, s.tr.note); err != nil {
			s.fail(err)
		}
	}()
	for _, w := range s.r.ws {
		w.AddGroup(id)
	}
	return g, nil
}

// finish completes Group g's Mission once its items are verified.
func (s *soak) finish(ctx context.Context, g *soakGroup) {
	defer s.closers.Done()
	g.items.Wait()
	defer func() {
		g.stop()
		<-g.done
	}()
	if ctx.Err() != nil {
		return
	}
	if err := s.r.auth.finish(ctx, g.id); err != nil {
		s.fail(err)
		return
	}
	s.r.auth.forget(g.id)
	s.mu.Lock()
	s.finished++
	s.done = append(s.done, g.id)
	s.mu.Unlock()
}

// item drives item k in Group g, offered to the workers in turn.
func (s *soak) item(ctx context.Context, g *soakGroup, k int) {
	defer s.items.Done()
	defer g.items.Done()
	defer func() { <-s.sem }()
	id := fmt.Sprintf("wi-%08d", k)
	begin := time.Now()
	err := s.r.driveItem(ctx, s.tr, g.id, s.r.workers[k%len(s.r.workers)], id)
	s.tr.forget(id)
	if err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	s.completed.Add(1)
	s.mu.Lock()
	s.lat = append(s.lat, time.Since(begin))
	s.mu.Unlock()
}

// soakSettleBound bounds how long a soak waits for the workers to settle.
const soakSettleBound = 30 * time.Second

// settle waits until every worker has caught up with each Group's head
// (where the authority tells it without a request) with no slot busy,
// then until the process's goroutines stop changing (five equal counts
// in a row, 20 ms apart), so that a reading holds no item's passing work.
func (s *soak) settle(ctx context.Context) error {
	err := poll(ctx, soakSettleBound, func() error {
		for i, w := range s.r.ws {
			st := w.Status()
			if st.FreeSlots != st.Slots {
				return fmt.Errorf("worker %s: %d of %d slots busy", s.r.workers[i], st.Slots-st.FreeSlots, st.Slots)
			}
			for _, g := range st.Groups {
				if h, ok := s.r.auth.head(g.GroupID); ok && g.Cursor < h {
					return fmt.Errorf("worker %s at %d of %s's %d events", s.r.workers[i], g.Cursor, g.GroupID, h)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("workers did not settle within %s: %w", soakSettleBound, err)
	}
	if s.cfg.SettleFinished {
		if err := poll(ctx, soakSettleBound, s.finishedGone); err != nil {
			return fmt.Errorf("finished Groups not archived and forgotten within %s: %w", soakSettleBound, err)
		}
	}
	same, last := 0, -1
	deadline := time.Now().Add(5 * time.Second)
	for same < 5 && time.Now().Before(deadline) {
		if n := goruntime.NumGoroutine(); n == last {
			same++
		} else {
			same, last = 1, n
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

// releaser is an authority that tells when a Group is archived and
// released, or purged when it purges (the embedded one).
type releaser interface{ released(g string) bool }

// finishedGone reports the first finished Group still archived-pending at
// the authority (when it can tell) or still held by a worker.
func (s *soak) finishedGone() error {
	s.mu.Lock()
	done := slices.Clone(s.done)
	s.mu.Unlock()
	rel, _ := s.r.auth.(releaser)
	for _, g := range done {
		if rel != nil && !rel.released(g) {
			return fmt.Errorf("group %s not archived and released by the authority", g)
		}
		for i, w := range s.r.ws {
			for _, gs := range w.Status().Groups {
				if gs.GroupID == g {
					return fmt.Errorf("worker %s still holds finished group %s", s.r.workers[i], g)
				}
			}
		}
	}
	return nil
}

// sample reads and reports one reading while the soak runs.
func (s *soak) sample(ctx context.Context, kind string) error {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	sm, err := s.read(ctx, kind)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
	if s.cfg.OnSample != nil {
		s.cfg.OnSample(sm)
	}
	return nil
}

// read takes one reading.
func (s *soak) read(ctx context.Context, kind string) (Sample, error) {
	sm := Sample{Kind: kind, Seconds: time.Since(s.start).Seconds()}
	started, completed := s.started.Load(), s.completed.Load()
	s.mu.Lock()
	sm.Items = SoakItems{Started: int(started), Completed: int(completed), InFlight: int(started - completed),
		MaxLateMs: float64(s.late) / float64(time.Millisecond), EndToEndMs: percentiles(s.lat)}
	s.late, s.lat = 0, nil
	sm.Groups = SoakGroups{Finished: s.finished, Open: s.opened - s.finished}
	s.mu.Unlock()
	var err error
	if sm.Process, err = readProcess(); err != nil {
		return sm, err
	}
	if s.cfg.HeapProfileDir != "" {
		name := fmt.Sprintf("heap-%03d-%05.0fs.pb.gz", s.profiles, max(sm.Seconds, 0))
		s.profiles++
		if err := writeHeapProfile(filepath.Join(s.cfg.HeapProfileDir, name)); err != nil {
			return sm, err
		}
	}
	if sm.Authority, err = s.r.auth.usage(ctx); err != nil {
		return sm, fmt.Errorf("authority's usage: %w", err)
	}
	if sm.Authority.Source == "process" {
		sm.Authority.Goroutines = f64(float64(sm.Process.GoroutinesBy["authority"]))
	}
	sm.Workers = WorkersUsage{Count: len(s.r.workers), Goroutines: sm.Process.GoroutinesBy["workers"], Store: Store{Dirs: map[string]int64{}}}
	for _, id := range s.r.workers {
		st, err := storeUsage(filepath.Join(s.r.dir, "workers", id), queue.FileName, workerDirs)
		if err != nil {
			return sm, fmt.Errorf("worker %s's store: %w", id, err)
		}
		sm.Workers.Store.add(st)
	}
	return sm, nil
}

// notes say what the final reading could not measure.
func (s *soak) notes(f Sample) []string {
	var out []string
	switch f.Authority.Source {
	case "process":
		out = append(out, "the authority runs in this process: heap, open files and RSS are the process's (process), shared with the workers and the driver; goroutines are told apart by the code that runs them")
	case "none":
		out = append(out, "authority: not measured (give its /metrics URL: --authority-metrics)")
	case "metrics":
		out = append(out, "authority: read from its /metrics; its store sizes are not exported there, so they are not measured")
		a := f.Authority
		for _, m := range []struct {
			name string
			v    *float64
		}{{"heapInuseBytes (go_memstats_heap_inuse_bytes)", a.HeapInuseBytes}, {"goroutines (go_goroutines)", a.Goroutines},
			{"openFiles (process_open_fds)", a.OpenFiles}, {"rssBytes (process_resident_memory_bytes)", a.RSSBytes},
			{"logEvents (mwp_authority_log_events)", a.LogEvents}, {"groups (mwp_authority_groups)", a.Groups},
			{"connections (mwp_authority_connections)", a.Connections}} {
			if m.v == nil {
				out = append(out, "authority: "+m.name+" is not in its /metrics")
			}
		}
	}
	if f.Growth != nil && f.Growth.Samples < 2 {
		out = append(out, fmt.Sprintf("growth: %d readings after the warm-up, so no slope after it (a longer --duration or a shorter --interval or --warmup)", f.Growth.Samples))
	}
	return out
}

// writeHeapProfile writes the heap profile as of the collection just
// forced (readProcess) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}
