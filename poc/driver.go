package poc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// Options configure one proof-of-concept run (`mwp-worker poc`).
type Options struct {
	// Dir keeps every store of the run (authority log, worker stores,
	// artifacts, effect log, fault journal, timeline); "" runs in a
	// temporary directory removed afterwards.
	Dir string
	// AutoApprove approves as the human owner as soon as a Mission awaits
	// approval; otherwise the run waits for the human on the approval page.
	AutoApprove bool
	Faults      []FaultName
	// Out receives progress lines for the operator (the URL of the approval
	// page first); nil discards them.
	Out    io.Writer
	Logger *slog.Logger
	// Timeout bounds the whole run (default 3 minutes, 30 minutes when a
	// human approves).
	Timeout time.Duration
	// OnApprovalPage is called with the approval page URL once it listens.
	OnApprovalPage func(url string)
	// GoHandlers runs every stage on its Go handler instead of the Python
	// one (`poc --handlers go`); without python3 they run anyway.
	GoHandlers bool

	// For tests only: thwart names faults whose moments the driver makes
	// but whose effects it switches off while still journalling the
	// injections, to prove that the run then fails with each fault named
	// and what did not happen (see thwartText); momentWait shortens
	// how long the driver waits for the protocol to react to a made
	// moment (defaultMomentWait).
	thwart     []FaultName
	momentWait time.Duration
	// weightBlind gives the workers' schedulers equal effective weights
	// for every Group: a scheduler blind to the weights, which the
	// contention check must fail (weightBlindWeights).
	weightBlind bool
}

// groupWeights are the Groups' own weights on the workers: none (1 each,
// so the Missions' priority classes alone set the shares), or with
// weightBlind the weights that cancel the classes out.
func (r *run) groupWeights() map[string]int64 {
	if !r.opts.weightBlind {
		return nil
	}
	prod := int64(1)
	for _, spec := range r.specs {
		prod *= classWeight(spec.PriorityClass)
	}
	w := map[string]int64{}
	for _, spec := range r.specs {
		w[spec.GroupID] = prod / classWeight(spec.PriorityClass)
	}
	return w
}

// The run's cast.
const (
	humanID    = "alice"
	worker1    = "worker-1" // shared by both Missions, two slots
	worker2    = "worker-2" // Mission A only; runs when a fault needs a second worker
	slotsPerWk = 2
	// queueDepth is the commitments per slot a PoC worker takes: room
	// for every stage both Missions have ready at once.
	queueDepth = (LoadStagesA + LoadStagesB + SoakStages + 8) / slotsPerWk
)

// The PoC's execution lease and start deadline. Short, so the
// lease-expiry fault (which waits a lease out) takes seconds; long enough
// that a lease renewed at half its remaining time (runtime.RenewAt, so at
// least 2 s are left at any moment) survives the one-second
// group-disconnect and the reconnection after it (reconnectCap).
const (
	pocLease       = 4 * time.Second
	pocStartWithin = 10 * time.Second
	reconnectCap   = 500 * time.Millisecond
)

// run holds everything one proof-of-concept run owns.
type run struct {
	opts    Options
	dir     string
	ctx     context.Context
	log     *slog.Logger
	out     io.Writer
	auth    *embed.Authority
	svc     *authoritylite.Service
	owner   *authoritylite.Principal
	effects *EffectLog
	journal *Journal
	holds   *Holds
	python  *PythonStages // nil: the Go twins of the Python stages run
	plan    *faultPlan
	specs   []MissionSpec
	keys    map[string]protocol.PrivateKey

	mu      sync.Mutex
	workers map[string]*workerRun
	coords  map[string]*Coordinator // by mission id
	links   map[string]*link        // by worker: its cuttable path to the authority
	errs    []error
	wg      sync.WaitGroup
}

type workerRun struct {
	id     string
	groups []string
	w      *runtime.Worker
	cancel context.CancelFunc
	done   chan error
}

// Run executes the proof of concept: two concurrent Missions on the
// embedded authority-lite sharing a worker, coordinator review, human
// approval, and the chosen faults; then it checks the invariants from the
// durable stores and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
		if !o.AutoApprove {
			o.Timeout = 30 * time.Minute
		}
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "mwp-poc-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if slices.Contains(o.thwart, FaultWorkerRestart) {
		defer runtime.TestHooks.NoResume.Store(false) // set at the restart
	}
	r := &run{opts: o, dir: dir, ctx: ctx, log: o.Logger, out: &lockedWriter{w: o.Out}, keys: map[string]protocol.PrivateKey{}, holds: NewHolds(),
		workers: map[string]*workerRun{}, coords: map[string]*Coordinator{}, links: map[string]*link{}}
	start := time.Now()
	if err := r.setup(); err != nil {
		r.shutdown()
		return nil, err
	}
	runErr := r.drive()
	end := time.Now()
	r.shutdown()
	// An error on the way (a fault step, a coordinator, an approval) means
	// something did not happen as the run says: the run does not pass.
	r.mu.Lock()
	if errs := r.errs; runErr == nil && len(errs) > 0 {
		runErr = fmt.Errorf("poc: %d error(s) during the run, the first: %w", len(errs), errs[0])
	}
	r.mu.Unlock()
	rep, err := r.report(start, end)
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		return rep, runErr
	}
	return rep, nil
}

// lockedWriter serializes progress lines written from the drive loop and
// the coordinators' goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *run) path(elem ...string) string { return filepath.Join(append([]string{r.dir}, elem...)...) }

func (r *run) key(kind protocol.ActorKind, id string) (protocol.PrivateKey, error) {
	if k, ok := r.keys[id]; ok {
		return k, nil
	}
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		return protocol.PrivateKey{}, err
	}
	if _, _, err := protocol.WriteKeyFiles(r.path("keys"), id, k); err != nil && !errors.Is(err, os.ErrExist) {
		return protocol.PrivateKey{}, err
	}
	r.keys[id] = k
	return k, nil
}

// setup starts the authority, the human, the workers and the coordinators.
func (r *run) setup() error {
	auth, err := embed.Start(embed.Config{Dir: r.path("authority"), Logger: r.log.With("component", "authority"),
		Limits: group.Limits{LeaseDuration: pocLease, StartWithin: pocStartWithin, MaxCandidates: 3, BlockedHold: 5 * time.Minute}})
	if err != nil {
		return err
	}
	r.auth, r.svc = auth, auth.Service
	fmt.Fprintf(r.out, "authority-lite listening on %s\n", auth.URL)
	hk, err := r.key(protocol.ActorHuman, humanID)
	if err != nil {
		return err
	}
	if err := r.svc.AddPrincipal(protocol.ActorHuman, humanID, hk.Public()); err != nil {
		return err
	}
	r.owner = r.svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: humanID}, hk)
	if r.effects, err = OpenEffectLog(r.path(EffectsFile), clock.Real{}, TinyProject()); err != nil {
		return err
	}
	if r.journal, err = OpenJournal(r.path(JournalFile)); err != nil {
		return err
	}
	switch {
	case r.opts.GoHandlers:
		fmt.Fprintf(r.out, "stage handlers: Go (asked for)\n")
	default:
		if r.python, err = InstallPythonStages(r.path("python")); err != nil {
			fmt.Fprintf(r.out, "Python stages not installed (%v): their Go twins run instead\n", err)
			break
		}
		fmt.Fprintf(r.out, "stage handlers: Python for %s\n", r.python.KindList())
	}
	base := time.Now()
	r.specs = []MissionSpec{MissionA(base), MissionB(base)}
	// The fault plan arms its holds before any handler runs.
	r.plan = newFaultPlan(r, r.opts.Faults)
	// Workers first: coordinators add registered agents as members.
	if err := r.startWorker(worker1, []string{r.specs[0].GroupID, r.specs[1].GroupID}); err != nil {
		return err
	}
	if err := r.waitRegistered(worker1); err != nil {
		return err
	}
	// worker-2 is registered but only started when a fault needs a second
	// worker (a reassignment): until then worker-1 wins every offer, so
	// both Missions share it and both of its slots.
	k2, err := r.key(protocol.ActorAgent, worker2)
	if err != nil {
		return err
	}
	if err := r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: worker2}, k2).Join(r.ctx, AgentCard(worker2, WorkerCapabilities(), slotsPerWk)); err != nil {
		return fmt.Errorf("join %s: %w", worker2, err)
	}
	for i, spec := range r.specs {
		workers := []string{worker1, worker2}
		if i == 1 {
			workers = []string{worker1}
		}
		if err := r.joinAgent("coord-"+spec.GroupID, protocol.RoleCoordinator); err != nil {
			return err
		}
		if err := StartMission(r.ctx, r.owner, spec, "coord-"+spec.GroupID, 10*time.Minute); err != nil {
			return fmt.Errorf("start %s: %w", spec.MissionID, err)
		}
		if err := r.startCoordinator(spec, "coord-"+spec.GroupID, workers); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "mission %s (%s, priority %s) started in %s\n", spec.MissionID, spec.Title, spec.PriorityClass, spec.GroupID)
	}
	return nil
}

// startWorker runs a worker agent on its own store, connected over wss.
func (r *run) startWorker(id string, groups []string) error {
	k, err := r.key(protocol.ActorAgent, id)
	if err != nil {
		return err
	}
	cfg := runtime.WorkerConfig{
		Dir: r.path("workers", id), Key: k, AgentID: id,
		Card:     AgentCard(id, WorkerCapabilities(), slotsPerWk),
		Groups:   groups,
		Handlers: Handlers(HandlerConfig{AgentID: id, Artifacts: r.svc, Integration: r.effects, Holds: r.holds, Python: r.python}),
		Logger:   r.log.With("component", "worker", "agent", id),
		Tick:     200 * time.Millisecond,
		// Every stage the two Missions offer at once is taken: at the
		// default depth (4 per slot) one Mission's load stages filled
		// the worker's commitments and the other's were refused and taken
		// one at a time as commitments ended, so the scheduler never had
		// both backlogs to share (the contention window fell apart).
		QueueDepth:   queueDepth,
		GroupWeights: r.groupWeights(),
		// A short reconnect cap: the injected outages end at known times
		// and the run should not wait out a 30 s backoff after them, nor
		// lose a lease to a slow reconnection.
		Client: client.Config{Backoff: client.Backoff{Base: 100 * time.Millisecond, Cap: reconnectCap, Jitter: client.JitterFull}},
	}
	cfg.UseInProcess(r.auth)
	l := r.links[id]
	if l == nil {
		if l, err = newLink(r.auth.Addr.String()); err != nil {
			return err
		}
		r.links[id] = l
	}
	cfg.URL = "wss://" + l.Addr() + "/mwp"
	w, err := runtime.NewWorker(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.ctx)
	wr := &workerRun{id: id, groups: groups, w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { wr.done <- w.Run(ctx) }()
	r.mu.Lock()
	r.workers[id] = wr
	r.mu.Unlock()
	return nil
}

// worker returns a running worker, nil when none.
func (r *run) worker(id string) *workerRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.workers[id]
}

// stopWorker stops a worker at its safe points and waits for it.
func (r *run) stopWorker(id string) error {
	r.mu.Lock()
	wr := r.workers[id]
	r.mu.Unlock()
	if wr == nil {
		return fmt.Errorf("no worker %s", id)
	}
	wr.cancel()
	select {
	case err := <-wr.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		// What the process counted and logged, kept for the fault checks.
		return r.observe(id, MomentStopped)
	case <-time.After(45 * time.Second):
		return fmt.Errorf("worker %s did not stop", id)
	}
}

// observe appends a snapshot of worker id's counters and status logs to
// the observations file (see Observation).
func (r *run) observe(id, moment string) error {
	wr := r.worker(id)
	if wr == nil {
		return fmt.Errorf("no worker %s", id)
	}
	o, err := observe(id, moment, wr.w, time.Now())
	if err != nil {
		return err
	}
	return appendObservation(r.path(ObservationsFile), o)
}

func (r *run) waitRegistered(id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := r.svc.AgentCard(id); ok && r.svc.SessionEpoch(id) > 0 {
			return nil
		}
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("worker %s did not register", id)
}

// joinAgent registers an in-process agent (a coordinator) once.
func (r *run) joinAgent(id string, role protocol.Role) error {
	k, err := r.key(protocol.ActorAgent, id)
	if err != nil {
		return err
	}
	if _, ok := r.svc.AgentCard(id); ok {
		return nil
	}
	if err := r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: id}, k).Join(r.ctx, AgentCard(id, nil, 1, role)); err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	return nil
}

func (r *run) coordinatorConfig(spec MissionSpec, id string, workers []string) CoordinatorConfig {
	return CoordinatorConfig{Service: r.svc, AgentID: id, Key: r.keys[id], Mission: spec, Workers: workers,
		LeaseDuration: 10 * time.Minute, OfferTTL: time.Minute, RequireProvenance: true, Logger: r.log.With("component", "coordinator", "agent", id)}
}

// startCoordinator runs a coordinator agent for spec (already joined and
// assigned).
func (r *run) startCoordinator(spec MissionSpec, id string, workers []string) error {
	c, err := NewCoordinator(r.coordinatorConfig(spec, id, workers))
	if err != nil {
		return err
	}
	r.runCoordinator(spec, c)
	return nil
}

// runCoordinator runs c for spec in the background.
func (r *run) runCoordinator(spec MissionSpec, c *Coordinator) {
	id := c.cfg.AgentID
	r.mu.Lock()
	r.coords[spec.MissionID] = c
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := c.Run(r.ctx); err != nil && !errors.Is(err, ErrStopped) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
			protocol.CodeOf(err) != protocol.CodeAuthStaleCoordinator {
			r.fail(fmt.Errorf("coordinator %s: %w", id, err))
		}
	}()
}

func (r *run) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	fmt.Fprintf(r.out, "error: %v\n", err)
	r.log.Error("poc", "err", err)
}

// shutdown stops coordinators and workers and closes the stores.
func (r *run) shutdown() {
	r.mu.Lock()
	coords := make([]*Coordinator, 0, len(r.coords))
	for _, c := range r.coords {
		coords = append(coords, c)
	}
	ids := make([]string, 0, len(r.workers))
	for id := range r.workers {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, c := range coords {
		c.Stop()
	}
	r.holds.ReleaseAll()
	for _, id := range ids {
		if err := r.stopWorker(id); err != nil {
			r.log.Warn("worker stop", "agent", id, "err", err)
		}
	}
	r.wg.Wait()
	_ = r.python.Close()
	for _, l := range r.links {
		l.Close()
	}
	if r.journal != nil {
		r.journal.Close()
	}
	if r.effects != nil {
		r.effects.Close()
	}
	if r.auth != nil {
		r.auth.Close()
	}
}
