package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/slots"
)

const stateOnline = offline.StateOnline

var signBuffered = offline.SignBuffered

func offlineItem(k itemKey) offline.Item { return offline.Item{GroupID: k.group, WorkItemID: k.id} }

func errSessionReplacedBy(err error) error {
	return fmt.Errorf("runtime: worker stopped: %w: %w", client.ErrSessionReplaced, err)
}

// schedule starts what the scheduler picks for free slots (lc.Step,
// Picked), then asks for the preemptions the scheduler names, one for each
// pressing item that cannot start, all at once (spec 11.3).
func (e *engine) schedule(now time.Time) {
	if !e.mon.MayStart() || e.fatal != nil {
		return
	}
	for {
		d, ok := e.sched.Next(now)
		if !ok {
			break
		}
		k := keyOf(d.Item)
		it := e.items[k]
		if it == nil {
			_ = e.sched.Finish(d.Item, now)
			continue
		}
		en, ok := e.store.Item(k.group, k.id)
		p := lc.Picked{Adoptable: ok && e.adoptable(it, en)}
		if ok && en.Checkpoint != nil && !TestHooks.NoResume.Load() {
			if _, err := e.cps.Get(en.Checkpoint.CheckpointID); err == nil {
				p.Resume = en.Checkpoint.CheckpointID
			}
		}
		var effs []lc.Effect
		it.Item, effs = lc.Step(it.core(), p, now)
		for _, ef := range effs {
			switch ef.(type) {
			case lc.Unpick:
				_ = e.sched.Finish(d.Item, now)
				it.inSched = false
			case lc.Selected:
				it.pickedAt = now
				e.scheduleChanged()
				e.log_.selection(SelectionLog{GroupID: k.group, WorkItemID: k.id, Basis: d.Basis, At: now})
			case lc.Launch:
				e.launch(it, en, now) // started already: its lease is adopted (sync)
			default:
				e.carryItem(it, ef, now)
			}
		}
	}
	for {
		req, ok := e.sched.Preempt(now)
		if !ok {
			break
		}
		e.scheduleChanged()
		e.log_.preempt(keyOf(req.Item), req.For, "scheduler", req.Basis, now)
		if v := e.items[keyOf(req.Item)]; v != nil {
			e.preempt(v, lc.PreemptAsked{Why: "scheduler", For: req.For}, now)
		}
	}
}

// tick feeds the time to every item (lc.Step, Ticked): renewals, leases
// ended by the worker's clock, the offline grace, preemptions that found
// no safe point.
func (e *engine) tick(now time.Time) {
	conn := lc.Reconciling
	switch e.mon.State() {
	case stateOnline:
		conn = lc.Online
	case offline.StateOffline:
		conn = lc.Offline
	}
	for _, it := range e.items {
		t := lc.Ticked{Conn: conn, Tick: e.cfg.Tick, PreemptTimeout: e.cfg.PreemptTimeout}
		if it.Phase == phRunning {
			t.Progress = e.progressOf(it, now)
			t.Grace, _ = e.mon.GraceDeadline(offlineItem(it.key))
		}
		if !it.AskedAt.IsZero() {
			st, ok := e.sched.Status(it.key.sched())
			t.Victim = ok && st.State == scheduler.StatePreempting
		}
		var effs []lc.Effect
		it.Item, effs = lc.Step(it.core(), t, now)
		e.carryTime(it, effs, now)
	}
}

// carryTime carries out what the time called for.
func (e *engine) carryTime(it *item, effs []lc.Effect, now time.Time) {
	for _, ef := range effs {
		switch ef := ef.(type) {
		case lc.BufferRenewal:
			e.bufferProgress(it, protocol.CmdLeaseRenew, ef.Payload, now)
		case lc.ExtendSlot:
			// Reversible work runs on through the grace (spec 11.5): the
			// slot's supervision must not end it at the lease expiry the
			// authority cannot extend now. Reconciliation settles the lease.
			_ = e.pool.RenewLease(it.slot, it.LeaseID, ef.Until)
		case lc.Preempt:
			e.askSlot(it, ef, now)
		case lc.RefusePreemption:
			// The run is never interrupted for it (spec 11.3): it keeps its
			// slot, the scheduler records the refusal and names another
			// victim or lets the waiting item take the next slot that
			// frees. Lease loss, cancellation and shutdown still stop it.
			if err := e.sched.RefusePreempt(it.key.sched()); err != nil {
				e.log.Error("scheduler refuse preemption", "item", it.key.sched(), "err", err)
				continue
			}
			e.scheduleChanged()
			e.log_.preemptRefused(it.key, now)
			e.log.Warn("preemption refused: the run reached no safe point and keeps its slot; it is not interrupted",
				"item", it.key.sched(), "for", ef.For, "lease", it.LeaseID, "waited", ef.Waited)
		default:
			e.carryItem(it, ef, now)
		}
	}
}

// preempt asks a run for a safe point (lc.Step, PreemptAsked).
func (e *engine) preempt(it *item, p lc.PreemptAsked, now time.Time) {
	var effs []lc.Effect
	it.Item, effs = lc.Step(it.core(), p, now)
	e.carryTime(it, effs, now)
}

// askSlot asks the run's slot for its safe point, unless the pool's
// shutdown does; the scheduler's requests are logged when it names them.
func (e *engine) askSlot(it *item, p lc.Preempt, now time.Time) {
	if p.Why != "scheduler" {
		e.log_.preempt(it.key, p.For, p.Why, scheduler.SelectionBasis{}, now)
	}
	if p.ByPool {
		return
	}
	if err := e.pool.Preempt(it.slot, it.LeaseID); err != nil {
		e.log.Warn("preempt", "item", it.key.sched(), "err", err)
	}
}

// launch runs an item whose execution lease the store now shows.
func (e *engine) launch(it *item, en queue.Entry, now time.Time) {
	l := en.Lease
	contract, err := e.store.Contract(it.key.group, it.key.id)
	mission := en.MissionID
	if mission == "" {
		m, _ := e.store.Mission(it.key.group)
		mission = m.MissionID
	}
	next, effs := lc.Step(it.core(), lc.Launched{LeaseID: l.LeaseID, Expires: l.ExpiresAt.Time, Epoch: en.OwnershipEpoch, Attempts: en.Attempts}, now)
	if len(effs) == 0 {
		e.log.Error("a second run of one item was not started", "item", it.key.sched(), "phase", it.Phase, "lease", l.LeaseID)
		return
	}
	it.Item, it.missionID, it.attempt = next, mission, effs[0].(lc.StartRun).Attempt
	it.reportedAt = now
	idx := -1
	if err == nil {
		idx, err = e.pool.Start(slots.Assignment{
			GroupID: it.key.group, MissionID: mission, WorkItemID: it.key.id, OwnershipEpoch: en.OwnershipEpoch,
			LeaseID: l.LeaseID, LeaseExpiresAt: l.ExpiresAt.Time, Contract: contract,
			Context: e.contextFor(it.key.group, it.key.id), CitedEvents: e.citedEvents, Extensions: e.offerExtensions(it.key, en),
			Credentials:   slots.Credentials{Token: leaseToken(e.secret, l.LeaseID, l.ExpiresAt.Time), ExpiresAt: l.ExpiresAt.Time},
			PriorAttempts: it.attempt - 1,
		})
	}
	if err != nil {
		// Nothing ran: report the failure under the new lease.
		e.log.Error("cannot run", "item", it.key.sched(), "err", err)
		it.Item, effs = lc.Step(it.core(), lc.StartFailed{Reason: err.Error(), AgentID: e.cfg.AgentID, Online: e.mon.State() == stateOnline}, now)
		e.carry(it, cause{}, effs, now)
		return
	}
	it.slot, it.startedAt = idx, now
	e.observeStart(it, now)
	e.w.m.runsStarted.Inc()
	e.log.Info("run started", "group", it.key.group, "item", it.key.id, "lease", l.LeaseID, "slot", idx, "ownershipEpoch", en.OwnershipEpoch,
		"resumeFrom", checkpointOf(en))
	e.mon.SetLease(offline.Lease{Item: offlineItem(it.key), AgentID: e.cfg.AgentID, SessionEpoch: l.SessionEpoch,
		OwnershipEpoch: en.OwnershipEpoch, LeaseID: l.LeaseID, ExpiresAt: l.ExpiresAt.Time,
		Reversible: contract.Risk.Class.Known() && contract.Risk.Class.Rank() < protocol.RiskHigh.Rank()})
	if st, ok := e.sched.Status(it.key.sched()); ok && st.State == scheduler.StatePreempting {
		// Picked as a victim while starting: patience runs from the
		// request the handler sees.
		e.preempt(it, lc.PreemptAsked{Why: "scheduler"}, now)
	} else if e.draining {
		e.preempt(it, lc.PreemptAsked{Why: "shutdown"}, now) // granted while the worker stops: straight to a safe point
	}
}

// renewed records an acknowledged renewal (the projection's new expiry).
func (e *engine) renewed(it *item, expires, now time.Time) {
	it.Expires, it.RenewedAt = expires, now
	_ = e.pool.RenewLease(it.slot, it.LeaseID, expires)
	_ = e.pool.SetCredentials(it.slot, it.LeaseID, slots.Credentials{Token: leaseToken(e.secret, it.LeaseID, expires), ExpiresAt: expires})
	if l, ok := e.mon.LeaseOf(offlineItem(it.key)); ok {
		l.ExpiresAt = expires
		e.mon.SetLease(l)
	}
}

func (e *engine) leaseLost(it *item, why string, now time.Time) {
	if it.Lost || it.Phase != phRunning {
		return
	}
	it.Lost = true
	e.log.Warn("execution lease lost; the slot stops at its next safe point", "item", it.key.sched(), "lease", it.LeaseID, "why", why)
	_ = e.pool.LeaseLost(it.slot, it.LeaseID)
}

// bufferProgress buffers a progress or checkpoint command with the usage
// since the last report; a full buffer pauses the slot at a safe point.
func (e *engine) bufferProgress(it *item, typ protocol.CommandType, p any, now time.Time) error {
	usage := protocol.Usage{WallClockSeconds: roundMs(now.Sub(it.reportedAt))}
	err := e.bufferCmd(it, typ, p, usage, now)
	switch {
	case err == nil:
		it.reportedAt = now
	case errors.Is(err, offline.ErrFull) || errors.Is(err, offline.ErrTooLarge):
		e.preempt(it, lc.PreemptAsked{Why: "offline-buffer-full"}, now)
	default:
		e.log.Warn("cannot buffer", "item", it.key.sched(), "type", typ, "err", err)
	}
	return err
}

func roundMs(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// leaseExpiry is the run's lease expiry as the store shows it, zero when
// the store shows another lease or none.
func (e *engine) leaseExpiry(it *item) time.Time {
	if en, ok := e.store.Item(it.key.group, it.key.id); ok && en.Lease != nil && en.Lease.LeaseID == it.LeaseID {
		return en.Lease.ExpiresAt.Time
	}
	return time.Time{}
}

// progressOf is the handler's latest structured report, or a minimal one.
func (e *engine) progressOf(it *item, now time.Time) protocol.Progress {
	if it.progress != nil {
		return *it.progress
	}
	return protocol.Progress{Phase: "running", MilestonesCompleted: protocol.List[string]{}, NextCheckpoint: "unknown",
		Blockers: protocol.List[string]{}, EvidenceRefs: protocol.List[string]{},
		RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(now.Add(e.cfg.Estimate)), Confidence: 0.5}}
}

func failureEvidence(subject, agentID string, now time.Time) protocol.List[protocol.Evidence] {
	return lc.FailureEvidence(subject, agentID, now)
}

// checkpointOf is the checkpoint an outcome names, or a new empty one when
// the handler yielded without any: work.checkpoint and work.block need one.
func (e *engine) checkpointOf(it *item, o slots.Outcome, now time.Time) (checkpoint.Checkpoint, error) {
	if o.Checkpoint != nil {
		return *o.Checkpoint, nil
	}
	return e.cps.Save(checkpoint.Key{GroupID: it.key.group, WorkItemID: it.key.id, OwnershipEpoch: it.Epoch}, now,
		checkpoint.Meta{Phase: "yielded", Note: "no handler checkpoint"}, nil)
}

func checkpointOf(en queue.Entry) string {
	if en.Checkpoint == nil {
		return ""
	}
	return en.Checkpoint.CheckpointID
}

// retried reports a failed attempt the retry policy runs again: from the
// run's goroutine, so it only logs and counts.
func (e *engine) retried(r slots.Retry) {
	s := r.Slot
	e.w.m.retries.WithLabelValues(s.Capability.ID).Inc()
	e.log.Warn("attempt failed; retrying", "group", s.GroupID, "item", s.WorkItemID, "lease", s.LeaseID,
		"attempt", r.Attempt, "retryIn", r.Delay.Seconds(), "err", r.Err)
	e.w.mu.Lock()
	if e.w.attempts == nil {
		e.w.attempts = map[string]uint64{}
	}
	e.w.attempts[s.LeaseID] = r.Attempt + 1
	for i := range e.w.status.Running { // the loop may not publish until the run ends
		if run := &e.w.status.Running[i]; run.LeaseID == s.LeaseID {
			run.Attempt = r.Attempt + 1
		}
	}
	e.w.mu.Unlock()
	if e.cfg.OnRetry != nil {
		e.cfg.OnRetry(r)
	}
}
