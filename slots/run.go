package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// run is one execution in one slot: every attempt of one assignment. Its
// state is reachable only through its own Work values and the pool.
type run struct {
	pool    *Pool
	slot    Slot
	handler Handler
	// Immutable copies taken at Start.
	contract     []byte // JSON of the contract
	budgets      protocol.Budgets
	retry        protocol.RetryPolicy
	deadline     time.Time
	allowedTools map[string]bool
	allowedOps   map[string]bool
	ctxPkg       []byte
	exts         protocol.Extensions
	cited        func(ctx context.Context, r protocol.EventRange, max int) ([]json.RawMessage, error)
	workdir      string
	startedAt    time.Time
	preempt      chan struct{} // closed by the first stop request
	wake         chan struct{} // cap 1: supervision or a stop request

	mu           sync.Mutex
	leaseExpires time.Time
	creds        Credentials
	remaining    protocol.Budgets // the host's view, refreshed per tool call
	usage        protocol.Usage   // WallClockSeconds is filled at the end
	prior        uint64           // attempts before this run
	attempts     uint64           // attempts of this run
	phase        phase
	attemptStart time.Time
	nextAttempt  time.Time
	cancel       context.CancelCauseFunc // of the running attempt
	preemptAt    time.Time               // first stop request
	lostAt       time.Time               // lease-loss request: the hard timeout runs from here
	leaseLost    bool
	killed       *action // set once: why the run or attempt was cancelled
	blocked      *protocol.Resolution
	lastCP       *checkpoint.Checkpoint // newest of this run, without state
	progress     *protocol.Progress
}

// errKilled is the cancellation cause handed to a cancelled handler.
type errKilled struct{ reason string }

func (e errKilled) Error() string { return "slots: cancelled: " + e.reason }

func (r *run) requestStop(now time.Time, leaseLost bool) {
	r.mu.Lock()
	if leaseLost && !r.leaseLost {
		r.leaseLost, r.lostAt = true, now
	}
	if r.preemptAt.IsZero() {
		r.preemptAt = now
		close(r.preempt)
	}
	r.mu.Unlock()
	r.kick()
}

func (r *run) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// killLocked cancels the running attempt (final: the whole run).
func (r *run) killLocked(reason string, final bool) {
	if r.killed != nil && r.killed.final {
		return
	}
	r.killed = &action{act: actCancel, final: final, reason: reason}
	if r.cancel != nil {
		r.cancel(errKilled{reason})
	}
	r.kick()
}

func (r *run) supervise(now time.Time, preemptTimeout time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := view{
		phase: r.phase, now: now, startedAt: r.startedAt, leaseExpires: r.leaseExpires,
		attemptStart: r.attemptStart, nextAttempt: r.nextAttempt, preemptAt: r.preemptAt, lostAt: r.lostAt,
		preemptTimeout: preemptTimeout, attemptTimeout: time.Duration(r.retry.AttemptTimeoutMs) * time.Millisecond,
		killed: r.killed != nil,
	}
	if r.budgets.WallClockSeconds != nil {
		v.wallLimit = max(time.Duration(*r.budgets.WallClockSeconds*float64(time.Second)), 1)
	}
	switch a := supervise(v); a.act {
	case actCancel:
		r.killLocked(a.reason, a.final)
	case actWake:
		r.kick()
	}
}

// execute runs attempts until one ends the run, frees the slot, and
// reports the outcome.
func (p *Pool) execute(r *run) {
	defer p.wg.Done()
	if b, err := p.cfg.Host.Remaining(context.Background(), r.slot); err == nil {
		r.mu.Lock()
		r.remaining = b
		r.mu.Unlock()
	}
	var o Outcome
	for {
		var rt *Retry
		if o, rt = p.attempt(r); rt == nil {
			break
		}
		if p.cfg.OnRetry != nil {
			p.cfg.OnRetry(*rt)
		}
		var again bool
		if o, again = p.backoff(r); !again {
			break
		}
	}
	now := p.cfg.Clock.Now()
	r.mu.Lock()
	o.Slot, o.Attempts, o.EndedAt = r.slot, r.attempts, now
	o.Usage = r.usage
	o.Usage.WallClockSeconds = now.Sub(r.startedAt).Seconds()
	if r.progress != nil {
		pr := cloneProgress(*r.progress)
		o.Progress = &pr
	}
	r.mu.Unlock()
	os.RemoveAll(r.workdir)
	p.release(r)
	p.cfg.Host.Finish(o)
}

// attempt runs the handler once. A non-nil Retry means: the attempt
// failed, wait out the backoff, then run another.
func (p *Pool) attempt(r *run) (o Outcome, rt *Retry) {
	now := p.cfg.Clock.Now()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r.mu.Lock()
	if r.killed != nil && r.killed.final {
		defer r.mu.Unlock()
		return r.endLocked(nil, Result{}, errKilled{r.killed.reason}), nil
	}
	r.killed = nil
	r.attempts++
	r.phase, r.attemptStart, r.cancel = phaseRunning, now, cancel
	r.mu.Unlock()

	w := &Work{r: r, attempt: r.prior + r.attempts}
	var res Result
	err := p.loadResume(r, w)
	if err == nil {
		res, err = callHandler(ctx, r.handler, w)
	} else {
		err = Permanent(err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	w.done, r.cancel = true, nil
	o = r.endLocked(w, res, err)
	if o.Kind != 0 {
		return o, nil
	}
	// A failed attempt: retry within the policy. An attempt timeout ends
	// only its attempt.
	r.killed = nil
	d := DecideRetry(r.retry, w.attempt, r.usage.Money, p.cfg.Clock.Now(), r.deadline)
	if !d.Retry {
		return r.failLocked(fmt.Sprintf("retries exhausted (%s) after attempt %d: %v", d.Exhausted, w.attempt, err), err), nil
	}
	r.phase, r.nextAttempt = phaseBackoff, p.cfg.Clock.Now().Add(d.Delay)
	if p.onBackoff != nil {
		p.onBackoff()
	}
	return Outcome{}, &Retry{Slot: r.slot, Attempt: w.attempt, Err: err, Delay: d.Delay}
}

// endLocked classifies an attempt's end; a zero Kind means a retryable
// failure.
func (r *run) endLocked(w *Work, res Result, err error) Outcome {
	preempted := errors.Is(err, ErrPreempted) || err == nil && res.Preempted
	switch {
	case r.leaseLost:
		o := Outcome{Kind: LeaseLost, Err: err, Reason: "execution lease lost"}
		if err == nil {
			o.Result = res // late: for audit only
		}
		return o
	case r.blocked != nil:
		res := *r.blocked
		return Outcome{Kind: Blocked, Resolution: &res, Checkpoint: r.lastCP}
	case r.killed != nil && r.killed.final:
		return r.failLocked(r.killed.reason, err)
	case r.killed != nil:
		return Outcome{} // attempt timeout: retry
	case preempted:
		cp := r.lastCP
		if cp == nil && w != nil && w.resume != nil {
			h := *w.resume
			h.State = nil
			cp = &h
		}
		if cp == nil {
			return r.failLocked("handler yielded without any checkpoint", err)
		}
		return Outcome{Kind: Preempted, Checkpoint: cp}
	case err == nil:
		return Outcome{Kind: Completed, Result: res}
	case !retryable(err):
		return r.failLocked(err.Error(), err)
	}
	return Outcome{}
}

func (r *run) failLocked(reason string, err error) Outcome {
	p := r.pool
	return Outcome{Kind: Failed, Reason: reason, Err: err, Evidence: []protocol.Evidence{{
		Subject:   r.slot.WorkItemID,
		Criteria:  protocol.List[string]{protocol.CriterionFailure},
		Method:    "mwp-worker slot supervision",
		Result:    protocol.EvidenceFail,
		Producer:  protocol.Actor{Kind: protocol.ActorAgent, ID: p.cfg.AgentID},
		Timestamp: protocol.NewTime(p.cfg.Clock.Now()),
		Artifacts: protocol.List[string]{},
	}}}
}

// backoff waits until supervision wakes the run for its next attempt, or
// ends the run if it was stopped meanwhile.
func (p *Pool) backoff(r *run) (Outcome, bool) {
	for {
		r.mu.Lock()
		switch {
		case r.leaseLost:
			defer r.mu.Unlock()
			return Outcome{Kind: LeaseLost, Reason: "execution lease lost"}, false
		case r.killed != nil:
			defer r.mu.Unlock()
			return r.failLocked(r.killed.reason, nil), false
		case !r.preemptAt.IsZero() && r.lastCP != nil:
			defer r.mu.Unlock()
			return Outcome{Kind: Preempted, Checkpoint: r.lastCP}, false
		case !p.cfg.Clock.Now().Before(r.nextAttempt), !r.preemptAt.IsZero():
			r.mu.Unlock()
			return Outcome{}, true
		}
		r.mu.Unlock()
		<-r.wake
	}
}

// loadResume gives w the newest checkpoint of its WorkItem; one from a
// higher ownership epoch means this execution is stale.
func (p *Pool) loadResume(r *run, w *Work) error {
	c, err := p.cfg.Checkpoints.Latest(r.slot.GroupID, r.slot.WorkItemID)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("slots: resume: %w", err)
	case c.Key.OwnershipEpoch > r.slot.OwnershipEpoch:
		return protocol.Errorf(protocol.CodeWorkStaleOwnership, "slots: %s has a checkpoint of ownership epoch %d, above %d", r.slot.WorkItemID, c.Key.OwnershipEpoch, r.slot.OwnershipEpoch)
	}
	w.resume = &c
	return nil
}

// callHandler runs h, turning a panic into a permanent failure.
func callHandler(ctx context.Context, h Handler, w *Work) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Permanent(fmt.Errorf("slots: handler panicked: %v", v))
		}
	}()
	return h.Run(ctx, w)
}
