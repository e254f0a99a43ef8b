package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

// Config is one run.
type Config struct {
	Items   int  // WorkItems driven to verified
	Lanes   int  // items in flight at once (closed loop)
	Workers int  // runtime.Workers, each with its own store
	Groups  int  // Groups (one Mission each); items and lanes spread over them
	Slots   int  // execution slots per worker
	Fsync   bool // false: every store opened with NoSync
	// Dir keeps the stores; "" uses a temporary directory removed after.
	Dir string
	// ItemTimeout bounds one item from authorize to verified (default 1m).
	ItemTimeout time.Duration
	Logger      *slog.Logger // nil: discarded
	// Remote, when set, targets that running authority instead of
	// starting one; Workers is then the number of its worker identities.
	Remote *Remote
	// Tune, when set, adjusts the embedded authority's and each worker's
	// configuration before they start (tests: retention and grace delays).
	Tune *Tuning
}

// Tuning adjusts what a run starts.
type Tuning struct {
	Authority func(*embed.Config)
	Worker    func(*runtime.WorkerConfig)
}

// DefaultItemTimeout bounds one item from authorize to verified.
const DefaultItemTimeout = time.Minute

// MaxLanes bounds Lanes: authority-lite's default policy keeps at most
// 256 WorkItems open per Group.
const MaxLanes = 256

// Check reports the first bad field of c.
func (c Config) Check() error {
	switch {
	case c.Items < 1:
		return fmt.Errorf("--items must be at least 1, not %d", c.Items)
	case c.Lanes < 1:
		return fmt.Errorf("--lanes must be at least 1, not %d", c.Lanes)
	case c.Lanes > c.Items:
		return fmt.Errorf("--lanes %d exceeds --items %d: some lanes would have nothing to drive", c.Lanes, c.Items)
	case c.Lanes > MaxLanes:
		return fmt.Errorf("--lanes %d exceeds %d, the open WorkItems a Group's policy allows", c.Lanes, MaxLanes)
	case c.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, not %d", c.Workers)
	case c.Groups < 1:
		return fmt.Errorf("--groups must be at least 1, not %d", c.Groups)
	case c.Groups > c.Items:
		return fmt.Errorf("--groups %d exceeds --items %d: some Groups would get no item", c.Groups, c.Items)
	case c.Slots < 1:
		return fmt.Errorf("--slots must be at least 1, not %d", c.Slots)
	}
	if c.Remote != nil {
		return c.Remote.check(c.Workers)
	}
	return nil
}

// noop is the handler: it does nothing and reports every acceptance
// criterion passed, naming one unpublished artifact digest (work.submit
// needs one), so an item costs only the protocol.
type noop struct{ agentID string }

var capability = protocol.Capability{ID: "bench.noop", Version: "1.0.0"}

func (noop) Capability() protocol.Capability { return capability }

func (h noop) Run(_ context.Context, w *slots.Work) (slots.Result, error) {
	id := w.Slot().WorkItemID
	var ev []protocol.Evidence
	for _, a := range w.Contract().AcceptanceCriteria {
		ev = append(ev, protocol.Evidence{Subject: id, Criteria: protocol.List[string]{a.ID}, Method: "bench-noop", Result: protocol.EvidencePass,
			Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: h.agentID}, Timestamp: protocol.NewTime(time.Now()), Artifacts: protocol.List[string]{}})
	}
	return slots.Result{Artifacts: []string{protocol.Digest([]byte(id))}, Evidence: ev}, nil
}

func contract(id string, now time.Time) protocol.WorkContract {
	cpu := 1.0
	return protocol.WorkContract{
		ContractID: "wc-" + id, Revision: 1, Goal: "no-op " + id,
		RequiredOutputs: protocol.List[protocol.OutputSpec]{{Name: "result", MediaType: "text/plain"}},
		AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
			{ID: "ac-1", Description: "handler returned", EvidenceRequired: protocol.List[string]{"result"}}},
		Inputs: protocol.List[protocol.InputRef]{}, Dependencies: protocol.List[protocol.Dependency]{},
		AllowedTools: protocol.List[string]{}, AllowedData: protocol.List[string]{}, AllowedOperations: protocol.List[string]{"read"},
		ResourceLimits:       protocol.ResourceLimits{CPU: &cpu, MemoryMiB: protocol.Uint64(64)},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: capability.ID, Version: "1.x"}},
		Deadline:             protocol.NewTime(now.Add(time.Hour)), Urgency: protocol.UrgencyNormal, BusinessImpact: protocol.ImpactMedium,
		Budgets: protocol.Budgets{WallClockSeconds: protocol.Float64(3600)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 1, Backoff: protocol.Backoff{InitialMs: 100, MaxMs: 1000, Multiplier: 2},
			AttemptTimeoutMs: 600000, CostLimit: 1},
		Risk: protocol.Risk{Class: protocol.RiskLow},
	}
}

func basis(now time.Time) protocol.SelectionBasis {
	return protocol.SelectionBasis{
		CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: capability.ID, Required: "1.x", Offered: capability.Version}},
		AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
		ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
		PolicyRulesApplied: protocol.List[string]{"bench"}}
}

// authority is the Group Authority as the driver reaches it: started in
// this process (embedded) or a running one it is given (remote).
type authority interface {
	name() string // "embedded", or the remote authority's URL
	close() error
	// connect points a worker's configuration at the authority.
	connect(wc *runtime.WorkerConfig)
	// registered reports whether the authority knows the agent.
	registered(ctx context.Context, agentID string) error
	// open creates Group g's Mission, assigns its coordinator and makes
	// every worker a member.
	open(ctx context.Context, g string, workers []string) error
	// coordinate sends one command as the Missions' coordinator.
	coordinate(ctx context.Context, typ protocol.CommandType, g string, payload any) error
	// groupID is the id of the run's n-th Group (from 0).
	groupID(n int) string
	// follow calls note for every WorkItem event of Group g from its
	// head when open returned, until ctx ends.
	follow(ctx context.Context, g string, note noteFunc) error
	// finish completes Group g's Mission once its items are all verified:
	// the coordinator submits it for approval, the owner approves it.
	finish(ctx context.Context, g string) error
	// forget drops what the driver holds of Group g, once finished.
	forget(g string)
	// head is Group g's last sequence, when known without a request.
	head(g string) (uint64, bool)
	// usage reads the authority's resources (a soak's readings).
	usage(ctx context.Context) (AuthorityUsage, error)
	// watch is given the run's workers, whose metrics may count commands.
	watch(ws []*runtime.Worker)
	// counts are the commands answered so far ("type result" → count:
	// accepted, or the error code) and each Group's last sequence seen.
	counts(groups []string) (map[string]float64, map[string]uint64, error)
	// limited is how many of the driver's requests the authority answered
	// RATE_LIMITED and were waited out, and how long, so far.
	limited() (int, time.Duration)
	// files are the authority's store files this process writes (none
	// for a remote one).
	files() []string
}

// noteFunc records one event of a WorkItem: its type, when the driver
// saw it and its signed size.
type noteFunc func(workItemID string, typ protocol.EventType, now time.Time, size int)

// rig is a running authority and the workers driven through it.
type rig struct {
	cfg     Config
	dir     string
	auth    authority
	groups  []string
	workers []string
	ws      []*runtime.Worker // the workers, in the order of workers
	stops   []func() error
}

func key(kind protocol.ActorKind, id string) (protocol.PrivateKey, error) {
	return protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
}

// missionOf is Group g's Mission.
func missionOf(g string) string { return "mis-" + g }

func createMission(g string) *protocol.CreateMissionPayload {
	return &protocol.CreateMissionPayload{MissionID: missionOf(g), Title: "bench " + g, Objective: "no-op WorkItems", PriorityClass: protocol.PriorityNormal}
}

func assignCoordinator(g, agentID string) *protocol.AssignCoordinatorPayload {
	return &protocol.AssignCoordinatorPayload{MissionID: missionOf(g), AgentID: agentID, LeaseDurationMs: uint64((24 * time.Hour).Milliseconds())}
}

func addWorker(agentID string) *protocol.ChangeMembershipPayload {
	return &protocol.ChangeMembershipPayload{Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: agentID}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}
}

// submission submits Group g's Mission for approval, as coordinator c:
// one piece of evidence that its items were driven (the authority checks
// that they are all verified).
func submission(g string, c protocol.Actor) *protocol.SubmitForApprovalPayload {
	return &protocol.SubmitForApprovalPayload{MissionID: missionOf(g), Summary: "bench: every WorkItem verified", Artifacts: protocol.List[string]{},
		Evidence: protocol.List[protocol.Evidence]{{Subject: missionOf(g), Criteria: protocol.List[string]{"bench"}, Method: "bench",
			Result: protocol.EvidencePass, Producer: c, Timestamp: protocol.NewTime(time.Now()), Artifacts: protocol.List[string]{}}}}
}

// approval approves Group g's Mission: one approval id per Mission.
func approval(g string) *protocol.ApproveMissionPayload {
	return &protocol.ApproveMissionPayload{MissionID: missionOf(g), ApprovalID: "apr-" + missionOf(g)}
}

// The subdirectories of a data directory a soak measures besides its
// bbolt file.
var (
	authorityDirs = []string{"snapshots", "artifacts"}
	workerDirs    = []string{"checkpoints", "artifacts", "work"}
)

// setup reaches the authority and starts the workers, creates one Mission
// per Group with its coordinator and makes every worker a member of every
// Group, and waits until each worker is ready.
func setup(ctx context.Context, cfg Config, dir string) (*rig, error) {
	r := &rig{cfg: cfg, dir: dir}
	if cfg.Remote != nil {
		a, err := dialRemote(ctx, *cfg.Remote)
		if err != nil {
			return r, err
		}
		r.auth = a
	} else {
		e, err := startEmbedded(ctx, cfg, dir)
		if e != nil {
			r.auth = e
			r.stops = append(r.stops, e.close)
		}
		if err != nil {
			return r, err
		}
	}
	for g := range cfg.Groups {
		r.groups = append(r.groups, r.auth.groupID(g))
	}
	// Committed (accepted, unfinished) items a worker takes: enough that
	// admission never refuses an offer for want of room.
	perWorker := (cfg.Lanes + cfg.Workers - 1) / cfg.Workers
	depth := max(4, (perWorker+cfg.Slots-1)/cfg.Slots+1)
	for i := range cfg.Workers {
		id, k, err := fmt.Sprintf("w%d", i+1), protocol.PrivateKey{}, error(nil)
		if cfg.Remote != nil {
			k, id = cfg.Remote.Workers[i].Key, cfg.Remote.Workers[i].Actor.ID
		} else if k, err = key(protocol.ActorAgent, id); err != nil {
			return r, err
		}
		wc := runtime.WorkerConfig{Dir: filepath.Join(dir, "workers", id), Key: k, AgentID: id,
			Card:     protocol.AgentCard{MaxConcurrency: uint64(cfg.Slots), AgentVersion: "1.0.0"},
			Groups:   r.groups,
			Handlers: []slots.Handler{noop{agentID: id}},
			Logger:   cfg.Logger, QueueDepth: depth, Estimate: time.Second, NoSync: !cfg.Fsync,
			NoticeBurst: -1, // no schedule updates or refusal notices: messages are not what is measured
		}
		r.auth.connect(&wc)
		if cfg.Tune != nil && cfg.Tune.Worker != nil {
			cfg.Tune.Worker(&wc)
		}
		w, err := runtime.NewWorker(wc)
		if err != nil {
			return r, err
		}
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		r.stops = append(r.stops, func() error {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("worker %s: %w", id, err)
			}
			return nil
		})
		r.workers = append(r.workers, id)
		r.ws = append(r.ws, w)
	}
	r.auth.watch(r.ws)
	for _, id := range r.workers {
		if err := poll(ctx, 30*time.Second, func() error { return r.auth.registered(ctx, id) }); err != nil {
			return r, err
		}
	}
	for _, g := range r.groups {
		if err := r.auth.open(ctx, g, r.workers); err != nil {
			return r, err
		}
	}
	for i, w := range r.ws {
		if err := poll(ctx, 30*time.Second, w.Ready); err != nil {
			return r, fmt.Errorf("worker %s not ready: %w", r.workers[i], err)
		}
	}
	return r, nil
}

// close stops the workers, then the authority.
func (r *rig) close() error {
	var errs []error
	for i := len(r.stops) - 1; i >= 0; i-- {
		errs = append(errs, r.stops[i]())
	}
	return errors.Join(errs...)
}

// final marks an error that waiting will not change.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// poll calls f until it returns nil or a final error, for at most d.
func poll(ctx context.Context, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if errors.As(err, new(final)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// storesDir is where a run keeps its stores: dir, created if need be, or
// a temporary directory that cleanup removes.
func storesDir(dir, prefix string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o700)
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// Run sets up, drives cfg.Items WorkItems and measures them.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.ItemTimeout <= 0 {
		cfg.ItemTimeout = DefaultItemTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, cleanup, err := storesDir(cfg.Dir, "mwp-bench-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r, err := setup(ctx, cfg, dir)
	if err != nil {
		if r != nil {
			err = errors.Join(err, r.close())
		}
		return nil, fmt.Errorf("setup: %w", err)
	}
	res, err := r.drive(ctx)
	if cerr := r.close(); err == nil && cerr != nil {
		err = fmt.Errorf("shutdown: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// drive runs the lanes and measures the window from the first authorize
// to the last verified item.
func (r *rig) drive(parent context.Context) (*Result, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	tr := newTracker(r.cfg.Items)
	var followers sync.WaitGroup
	for _, g := range r.groups {
		followers.Add(1)
		go func() {
			defer followers.Done()
			if err := r.auth.follow(ctx, g, tr.note); err != nil {
				tr.fail(err)
			}
		}()
	}
	files := r.storeFiles()
	sampler := newSampler(files)
	sampler.start(ctx)
	before, err := snapshot(files, r.auth, r.groups)
	if err != nil {
		return nil, err
	}
	var next atomic.Int64
	var lanes sync.WaitGroup
	start := time.Now()
	for range r.cfg.Lanes {
		lanes.Add(1)
		go func() {
			defer lanes.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= r.cfg.Items || ctx.Err() != nil {
					return
				}
				if err := r.item(ctx, tr, i); err != nil {
					tr.fail(err)
					cancel()
					return
				}
			}
		}()
	}
	lanes.Wait()
	end := time.Now()
	after, serr := snapshot(files, r.auth, r.groups)
	grows := sampler.stop()
	held := readHeld()
	cancel()
	followers.Wait()
	if err := parent.Err(); err != nil {
		return nil, fmt.Errorf("stopped (%w) with %d of %d items verified", err, tr.verified(), r.cfg.Items)
	}
	if err := tr.err(); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	if n := tr.verified(); n != r.cfg.Items {
		return nil, fmt.Errorf("%d of %d items reached verified", n, r.cfg.Items)
	}
	res, err := r.result(tr, end.Sub(start), before, after, grows)
	if res != nil {
		res.Held = held
	}
	return res, err
}

// item drives WorkItem i from authorize to verified.
func (r *rig) item(ctx context.Context, tr *tracker, i int) error {
	g := r.groups[i%len(r.groups)]
	w := r.workers[(i/len(r.groups))%len(r.workers)]
	return r.driveItem(ctx, tr, g, w, fmt.Sprintf("wi-%07d", i))
}

// driveItem drives WorkItem id of Group g, offered to worker w, from
// authorize to verified.
func (r *rig) driveItem(ctx context.Context, tr *tracker, g, w, id string) error {
	t := tr.add(id)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ItemTimeout)
	defer cancel()
	now := time.Now()
	t.begin = now
	c := contract(id, now)
	if err := r.auth.coordinate(ctx, protocol.CmdWorkAuthorize, g, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: missionOf(g), Contract: c}); err != nil {
		return fmt.Errorf("%s: work.authorize: %w", id, err)
	}
	if err := r.auth.coordinate(ctx, protocol.CmdWorkOffer, g, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: w, SelectionBasis: basis(now)}}, ExpiresAt: protocol.NewTime(now.Add(time.Minute))}); err != nil {
		return fmt.Errorf("%s: work.offer: %w", id, err)
	}
	if err := t.await(ctx, phaseSubmitted); err != nil {
		return fmt.Errorf("%s offered to %s in %s: %w", id, w, g, err)
	}
	if err := r.auth.coordinate(ctx, protocol.CmdWorkAcceptResult, g, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1}); err != nil {
		return fmt.Errorf("%s: work.accept_result: %w", id, err)
	}
	if err := t.await(ctx, phaseVerified); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// storeFiles are the bbolt files this process writes: the authority's,
// when embedded, and each worker's.
func (r *rig) storeFiles() []string {
	files := r.auth.files()
	for _, id := range r.workers {
		files = append(files, filepath.Join(r.dir, "workers", id, queue.FileName))
	}
	return files
}

// cores is what the process may run on at once.
func cores() int { return goruntime.GOMAXPROCS(0) }
