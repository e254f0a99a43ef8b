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

// schedule starts what the scheduler picks for free slots, then asks for
// the preemptions the scheduler names, one for each pressing item that
// cannot start, all at once (spec 11.3).
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
		if it == nil || it.Phase != phQueued {
			_ = e.sched.Finish(d.Item, now)
			if it != nil {
				it.inSched = false
			}
			continue
		}
		it.Phase, it.pickedAt = phStarting, now
		e.scheduleChanged()
		e.log_.selection(SelectionLog{GroupID: k.group, WorkItemID: k.id, Basis: d.Basis, At: now})
		en, ok := e.store.Item(k.group, k.id)
		if ok && e.adoptable(it, en) {
			e.launch(it, en, now) // started already: its lease is adopted (sync)
			continue
		}
		p := &protocol.StartWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.Epoch}
		if ok && en.Checkpoint != nil && !TestHooks.NoResume.Load() {
			if _, err := e.cps.Get(en.Checkpoint.CheckpointID); err == nil {
				p.ResumeFromCheckpointID = en.Checkpoint.CheckpointID
			}
		}
		e.queueCmd(it, protocol.CmdWorkStart, p)
	}
	for {
		req, ok := e.sched.Preempt(now)
		if !ok {
			break
		}
		e.scheduleChanged()
		v := e.items[keyOf(req.Item)]
		e.log_.preempt(keyOf(req.Item), req.For, "scheduler", req.Basis, now)
		if v != nil {
			v.askedAt, v.askedFor = now, req.For
		}
		if v != nil && v.Phase == phRunning {
			e.preempt(v)
		}
	}
}

// refusePreemptions settles the scheduler's preemptions that found no
// safe point within PreemptTimeout. The run is never interrupted for it
// (spec 11.3): it keeps its slot, the scheduler records the refusal and
// names another victim or lets the waiting item take the next slot that
// frees. Lease loss, cancellation and shutdown still stop it.
func (e *engine) refusePreemptions(now time.Time) {
	for _, it := range e.items {
		if it.askedAt.IsZero() || now.Sub(it.askedAt) < e.cfg.PreemptTimeout {
			continue
		}
		waited, forID := now.Sub(it.askedAt), it.askedFor
		it.askedAt, it.askedFor = time.Time{}, ""
		if it.Phase != phRunning || it.Lost {
			continue
		}
		if st, ok := e.sched.Status(it.key.sched()); !ok || st.State != scheduler.StatePreempting {
			continue
		}
		if err := e.sched.RefusePreempt(it.key.sched()); err != nil {
			e.log.Error("scheduler refuse preemption", "item", it.key.sched(), "err", err)
			continue
		}
		e.scheduleChanged()
		e.log_.preemptRefused(it.key, now)
		e.log.Warn("preemption refused: the run reached no safe point and keeps its slot; it is not interrupted",
			"item", it.key.sched(), "for", forID, "lease", it.LeaseID, "waited", waited)
	}
}

func (e *engine) preempt(it *item) {
	if it.Preempting || it.Phase != phRunning {
		return
	}
	it.Preempting = true
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
	it.renewedAt, it.reportedAt, it.retryAt, it.askedAt = now, now, time.Time{}, time.Time{}
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
		it.askedAt = now // patience runs from the request the handler sees
		e.preempt(it)    // picked as a victim while starting
	} else if e.draining {
		e.log_.preempt(it.key, "", "shutdown", scheduler.SelectionBasis{}, now)
		e.preempt(it) // granted while the worker stops: straight to a safe point
	}
}

// renewed records an acknowledged renewal (the projection's new expiry).
func (e *engine) renewed(it *item, expires, now time.Time) {
	it.Expires, it.renewedAt = expires, now
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

// renewals renews leases at half their remaining time; offline, the
// progress is signed with the binding and buffered instead (spec 11.5).
func (e *engine) renewals(now time.Time) {
	for _, it := range e.items {
		if it.Phase != phRunning || it.Renewing || it.Lost || now.Before(it.renewDue()) {
			continue
		}
		p := &protocol.RenewLeasePayload{WorkItemID: it.key.id, OwnershipEpoch: it.Epoch, LeaseID: it.LeaseID, Progress: e.progressOf(it, now)}
		switch e.mon.State() {
		case stateOnline:
			it.Renewing = true
			e.queueCmd(it, protocol.CmdLeaseRenew, p)
		case offline.StateOffline:
			e.bufferProgress(it, protocol.CmdLeaseRenew, p, now)
			it.retryAt = now.Add(10 * e.cfg.Tick)
		}
	}
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
		e.log_.preempt(it.key, "", "offline-buffer-full", scheduler.SelectionBasis{}, now)
		e.preempt(it)
	default:
		e.log.Warn("cannot buffer", "item", it.key.sched(), "type", typ, "err", err)
	}
	return err
}

func roundMs(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// offlinePauses asks running work to pause at a safe point before its grace
// deadline while the authority is unreachable.
// leaseEnds stops, online, a run whose lease reached its end without a
// renewal the authority accepted (refused as stale, say, after a clock
// jump): the worker no longer holds the item. Offline, the grace rules of
// offlinePauses apply instead.
func (e *engine) leaseEnds(now time.Time) {
	if e.mon.State() != stateOnline {
		return
	}
	for _, it := range e.items {
		if it.Phase == phRunning && !it.Lost && e.leaseOver(it, now) {
			e.leaseLost(it, "the lease ended without an accepted renewal", now)
		}
	}
}

// leaseOver reports that the run's lease has ended by the worker's clock
// (online: offline, the grace of spec 11.5 decides and reconciliation
// settles the lease). Nothing more is sent under such a lease, whatever an
// authority whose clock is behind would still accept.
func (e *engine) leaseOver(it *item, now time.Time) bool {
	return it.LeaseOver(e.mon.State() == stateOnline, now)
}

// leaseExpiry is the run's lease expiry as the store shows it, zero when
// the store shows another lease or none.
func (e *engine) leaseExpiry(it *item) time.Time {
	if en, ok := e.store.Item(it.key.group, it.key.id); ok && en.Lease != nil && en.Lease.LeaseID == it.LeaseID {
		return en.Lease.ExpiresAt.Time
	}
	return time.Time{}
}

func (e *engine) offlinePauses(now time.Time) {
	if e.mon.State() == stateOnline {
		return
	}
	for _, it := range e.items {
		if it.Phase != phRunning {
			continue
		}
		dl, ok := e.mon.GraceDeadline(offlineItem(it.key))
		if ok && dl.After(it.Expires) {
			// Reversible work runs on through the grace (spec 11.5): the
			// slot's supervision must not end it at the lease expiry the
			// authority cannot extend now. Reconciliation settles the lease.
			_ = e.pool.RenewLease(it.slot, it.LeaseID, dl)
		}
		if it.Preempting {
			continue
		}
		if ok && !now.Before(dl.Add(-2*e.cfg.Tick)) {
			e.log_.preempt(it.key, "", "offline-grace", scheduler.SelectionBasis{}, now)
			e.preempt(it)
		}
	}
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
