package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// Defaults of Config.
const (
	DefaultPreemptTimeout = 30 * time.Second
	DefaultTickInterval   = 250 * time.Millisecond
)

// ErrNoHandler is returned by Start when no handler provides a required
// capability of the contract.
var ErrNoHandler = errors.New("slots: no handler for the required capabilities")

// Config sets up a Pool.
type Config struct {
	AgentID  string // producer of failure Evidence
	Slots    int    // the Agent Card's maxConcurrency
	Handlers []Handler
	Host     Host
	// Checkpoints is the durable store; every slot writes only under its
	// own (group, item, epoch).
	Checkpoints *checkpoint.Store
	// Ledger makes repeated tool operations return their first result;
	// nil runs every call.
	Ledger Ledger
	Clock  clock.Clock // nil: the system clock
	// WorkRoot holds each run's private working directory; "" is the
	// system temp directory.
	WorkRoot string
	// PreemptTimeout is how long a handler may take to reach a safe point
	// after a lease-loss request before it is cancelled. A preemption or
	// shutdown request never cancels a run (spec 11.3: no interruption at
	// an unsafe point); what an unanswered preemption means is the
	// caller's to decide.
	PreemptTimeout time.Duration
	// TickInterval paces supervision (Tick); negative: the caller calls
	// Tick itself (tests with a fake clock).
	TickInterval time.Duration
	// Logger is the worker's; each run's Work.Logger adds the run's ids
	// to it. nil: handlers' lines are discarded.
	Logger *slog.Logger
	// OnRetry, when set, is told of every failed attempt the retry policy
	// runs again, from the run's goroutine and before its backoff: a
	// retry happens inside one lease, so the log never shows it.
	OnRetry func(Retry)
}

// Retry is one failed attempt that will be run again.
type Retry struct {
	Slot    Slot
	Attempt uint64 // the attempt that failed, 1-based across the item's acceptances
	Err     error
	Delay   time.Duration // the backoff before the next attempt
}

// Pool runs handlers in a fixed number of isolated slots.
type Pool struct {
	cfg  Config
	stop chan struct{}
	wg   sync.WaitGroup // run goroutines and the ticker

	mu     sync.Mutex
	runs   []*run // nil: free
	closed bool

	// onBackoff, when set (tests only), runs when a run enters backoff,
	// with the run's lock held.
	onBackoff func()
}

// New returns a pool with cfg.Slots free slots.
func New(cfg Config) (*Pool, error) {
	switch {
	case cfg.Slots <= 0:
		return nil, fmt.Errorf("slots: %d slots", cfg.Slots)
	case cfg.Host == nil || cfg.Checkpoints == nil:
		return nil, errors.New("slots: a Host and a checkpoint Store are required")
	case cfg.AgentID == "":
		return nil, errors.New("slots: AgentID is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.PreemptTimeout <= 0 {
		cfg.PreemptTimeout = DefaultPreemptTimeout
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = DefaultTickInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pool{cfg: cfg, stop: make(chan struct{}), runs: make([]*run, cfg.Slots)}
	if cfg.TickInterval > 0 {
		p.wg.Add(1)
		go p.ticker()
	}
	return p, nil
}

func (p *Pool) ticker() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.Tick()
		}
	}
}

// Start runs the handler for a's capabilities in the lowest free slot and
// returns its index. The slot's Work sees only a's contract, context,
// credentials, checkpoints and keys, all copied here.
func (p *Pool) Start(a Assignment) (int, error) {
	now := p.cfg.Clock.Now()
	switch {
	case a.GroupID == "" || a.MissionID == "" || a.WorkItemID == "" || a.LeaseID == "":
		return -1, protocol.Errorf(protocol.CodeInvalidCommand, "slots: group, mission, work item and lease ids are required")
	case !now.Before(a.LeaseExpiresAt):
		return -1, protocol.Errorf(protocol.CodeWorkLeaseExpired, "slots: lease %s expired at %s", a.LeaseID, a.LeaseExpiresAt.UTC().Format(time.RFC3339))
	}
	if len(a.Context) > 0 {
		// Spec 13.3: content of one Mission never enters another's context.
		pkg, err := protocol.DecodeContextPackage(a.Context, protocol.DecodeOptions{})
		if err != nil {
			return -1, protocol.Errorf(protocol.CodeInvalidCommand, "slots: the context package: %v", err)
		}
		if err := pkg.Covers(a.GroupID, a.MissionID, a.WorkItemID); err != nil {
			return -1, fmt.Errorf("slots: %w", err)
		}
	}
	h := pickHandler(p.cfg.Handlers, a.Contract.RequiredCapabilities)
	if h == nil {
		return -1, fmt.Errorf("%w: %v", ErrNoHandler, a.Contract.RequiredCapabilities)
	}
	contract, err := json.Marshal(a.Contract)
	if err != nil {
		return -1, fmt.Errorf("slots: contract: %w", err)
	}
	r := &run{
		pool: p, handler: h, contract: contract, budgets: a.Contract.Budgets,
		retry: a.Contract.RetryPolicy, deadline: a.Contract.Deadline.Time,
		allowedTools: set(a.Contract.AllowedTools), allowedOps: set(a.Contract.AllowedOperations),
		ctxPkg: append([]byte(nil), a.Context...), cited: a.CitedEvents, exts: maps.Clone(a.Extensions), startedAt: now,
		preempt: make(chan struct{}), wake: make(chan struct{}, 1),
		leaseExpires: a.LeaseExpiresAt, creds: a.Credentials, prior: a.PriorAttempts,
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return -1, ErrClosed
	}
	idx := -1
	for i, o := range p.runs {
		if o == nil && idx < 0 {
			idx = i
		}
		if o != nil && o.slot.GroupID == a.GroupID && o.slot.WorkItemID == a.WorkItemID {
			return -1, fmt.Errorf("slots: %s/%s is already running in slot %d", a.GroupID, a.WorkItemID, i)
		}
	}
	if idx < 0 {
		return -1, ErrNoFreeSlot
	}
	r.slot = Slot{Index: idx, GroupID: a.GroupID, MissionID: a.MissionID, WorkItemID: a.WorkItemID,
		OwnershipEpoch: a.OwnershipEpoch, LeaseID: a.LeaseID, Capability: h.Capability()}
	if r.workdir, err = os.MkdirTemp(p.cfg.WorkRoot, fmt.Sprintf("slot%d-", idx)); err != nil {
		return -1, fmt.Errorf("slots: workdir: %w", err)
	}
	p.runs[idx] = r
	p.wg.Add(1)
	go p.execute(r)
	return idx, nil
}

// lookup returns the run in slot idx if it holds lease leaseID.
func (p *Pool) lookup(idx int, leaseID string) (*run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idx < 0 || idx >= len(p.runs) || p.runs[idx] == nil || p.runs[idx].slot.LeaseID != leaseID {
		return nil, fmt.Errorf("%w: slot %d lease %q", ErrNoRun, idx, leaseID)
	}
	return p.runs[idx], nil
}

// Preempt asks the run in slot idx to reach a safe point, checkpoint and
// yield: its PreemptRequested channel closes. It is a request only: a run
// that never reaches a safe point keeps its slot (spec 11.3).
func (p *Pool) Preempt(idx int, leaseID string) error {
	r, err := p.lookup(idx, leaseID)
	if err != nil {
		return err
	}
	r.requestStop(p.cfg.Clock.Now(), false)
	return nil
}

// LeaseLost tells the run in slot idx that its lease is gone: it stops at
// the next safe point, its tool calls, progress and artifacts are refused
// from now on, and its outcome is LeaseLost whatever it returns. Past
// Config.PreemptTimeout it is cancelled.
func (p *Pool) LeaseLost(idx int, leaseID string) error {
	r, err := p.lookup(idx, leaseID)
	if err != nil {
		return err
	}
	r.requestStop(p.cfg.Clock.Now(), true)
	return nil
}

// RenewLease records a renewal of the run's execution lease.
func (p *Pool) RenewLease(idx int, leaseID string, expiresAt time.Time) error {
	r, err := p.lookup(idx, leaseID)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.leaseExpires = expiresAt
	r.mu.Unlock()
	return nil
}

// SetCredentials rotates the run's credentials (spec 11.3: tokens may
// rotate while the lease stands; they never outlive it).
func (p *Pool) SetCredentials(idx int, leaseID string, c Credentials) error {
	r, err := p.lookup(idx, leaseID)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.creds = c
	r.mu.Unlock()
	return nil
}

// Tick supervises every run at the clock's current time: it cancels runs
// past their lease, wall-clock budget, lease-loss timeout or attempt
// timeout, and starts attempts whose backoff is over.
func (p *Pool) Tick() {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	runs := append([]*run(nil), p.runs...)
	p.mu.Unlock()
	for _, r := range runs {
		if r != nil {
			r.supervise(now, p.cfg.PreemptTimeout)
		}
	}
}

// Running lists the occupied slots.
func (p *Pool) Running() []Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Slot
	for _, r := range p.runs {
		if r != nil {
			out = append(out, r.slot)
		}
	}
	return out
}

// Free counts the free slots.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.runs {
		if r == nil {
			n++
		}
	}
	return n
}

// Shutdown refuses new runs, asks every run to stop at a safe point and
// waits for their outcomes. When ctx ends first, the remaining runs are
// cancelled (reported Failed) and ctx's error is returned without waiting
// for handlers that ignore cancellation. Safe to call twice.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	runs := append([]*run(nil), p.runs...)
	p.mu.Unlock()
	now := p.cfg.Clock.Now()
	for _, r := range runs {
		if r != nil {
			r.requestStop(now, false)
		}
	}
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	runs = append(runs[:0], p.runs...)
	p.mu.Unlock()
	for _, r := range runs {
		if r != nil {
			r.mu.Lock()
			r.killLocked("worker shutting down", true)
			r.mu.Unlock()
		}
	}
	return ctx.Err()
}

// release frees r's slot.
func (p *Pool) release(r *run) {
	p.mu.Lock()
	if p.runs[r.slot.Index] == r {
		p.runs[r.slot.Index] = nil
	}
	p.mu.Unlock()
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}
