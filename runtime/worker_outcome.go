package runtime

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/missionweave/mwp-worker/slots"
)

// heldOutcome is a run's end that needs the authority (submission, block,
// failure) while the worker is offline or reconciling.
type heldOutcome struct {
	key itemKey
	o   slots.Outcome
}

// onOutcome frees the run's scheduler slot and sends what the outcome
// calls for (spec 11.3, 11.4).
func (e *engine) onOutcome(o slots.Outcome, now time.Time) {
	k := itemKey{o.Slot.GroupID, o.Slot.WorkItemID}
	it := e.items[k]
	if it == nil || it.leaseID != o.Slot.LeaseID {
		e.log.Warn("outcome of an unknown run", "item", k.sched(), "lease", o.Slot.LeaseID, "kind", o.Kind)
		return
	}
	if o.Progress != nil {
		p := *o.Progress
		it.progress = &p
	}
	level := slog.LevelInfo
	if o.Kind != slots.Completed && o.Kind != slots.Preempted {
		level = slog.LevelWarn // failed, blocked, cancelled, lease lost: someone may have to act
	}
	e.log.Log(context.Background(), level, "run ended", "group", k.group, "item", k.id, "lease", it.leaseID, "outcome", o.Kind, "reason", o.Reason, "err", o.Err)
	e.w.m.runs.WithLabelValues(o.Kind.String()).Inc()
	if o.Kind != slots.LeaseLost && o.Kind != slots.Preempted && (it.lost || e.leaseOver(it, now)) {
		// The run ended as its lease did: its result is late, kept for
		// audit and never sent.
		e.log.Warn("run ended after its lease: the outcome is not sent", "item", k.sched(), "lease", it.leaseID, "outcome", o.Kind)
		o.Kind = slots.LeaseLost
	}
	it.phase, it.slot = phFinishing, -1
	if o.Kind != slots.Preempted {
		e.track(it, false)
	}
	if o.Kind == slots.Completed {
		e.observeRun(it, now)
	}
	switch o.Kind {
	case slots.Preempted:
		// The slot is handed over only once the checkpoint is emitted
		// (spec 11.3): see releaseAfterCheckpoint.
		e.sendCheckpoint(it, o, now)
	case slots.LeaseLost:
		e.endRun(it, false, now)
		e.log_.outcome(OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.leaseID, Kind: o.Kind.String(), At: now})
		// A late result: kept in Status for audit, never submitted.
	default:
		e.endRun(it, false, now)
		if e.mon.State() != stateOnline {
			e.held = append(e.held, heldOutcome{k, o})
			e.log_.outcome(OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.leaseID, Kind: o.Kind.String(), Sent: "held until reconciled", At: now})
			break
		}
		e.sendOutcome(it, o, now)
	}
	e.mon.Release(offlineItem(k))
	if len(it.cmds) == 0 && !it.sending && o.Kind == slots.LeaseLost {
		e.forget(it)
		if !e.draining {
			e.sync(k)
		}
	}
}

// sendOutcome sends work.submit, work.block or work.fail for a run.
func (e *engine) sendOutcome(it *item, o slots.Outcome, now time.Time) {
	k := it.key
	ol := OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.leaseID, Kind: o.Kind.String(), At: now}
	switch o.Kind {
	case slots.Completed:
		ev := protocol.List[protocol.Evidence](o.Result.Evidence)
		if ev == nil {
			ev = protocol.List[protocol.Evidence]{}
		}
		e.queueCmd(it, protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.epoch, LeaseID: it.leaseID,
			Artifacts: append(protocol.List[string]{}, o.Result.Artifacts...), Evidence: ev, Progress: o.Progress})
		ol.Sent = string(protocol.CmdWorkSubmit)
	case slots.Blocked:
		cp, err := e.checkpointOf(it, o, now)
		if err != nil {
			ol.Err = err.Error()
			break
		}
		res := protocol.Resolution{Kind: protocol.ResolutionOther, Detail: "blocked"}
		if o.Resolution != nil {
			res = *o.Resolution
		}
		e.queueCmd(it, protocol.CmdWorkBlock, &protocol.BlockWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.epoch, LeaseID: it.leaseID,
			CheckpointID: cp.ID, StateDigest: cp.Digest, Resolution: res, Progress: o.Progress})
		ol.Sent, ol.Checkpoint = string(protocol.CmdWorkBlock), cp.ID
	case slots.Failed:
		ev := protocol.List[protocol.Evidence](o.Evidence)
		if len(ev) == 0 {
			ev = failureEvidence(k.id, e.cfg.AgentID, now)
		}
		reason := o.Reason
		if reason == "" {
			reason = "failed"
		}
		e.queueCmd(it, protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: k.id, Reason: reason, Evidence: ev,
			OwnershipEpoch: protocol.Uint64(it.epoch), LeaseID: it.leaseID})
		ol.Sent = string(protocol.CmdWorkFail)
	}
	e.log_.outcome(ol)
}

// sendCheckpoint sends (or, offline, buffers) work.checkpoint for a
// preempted run: the durable progress that releases the execution lease
// and returns the item to its Group queue (spec 11.3).
func (e *engine) sendCheckpoint(it *item, o slots.Outcome, now time.Time) {
	k := it.key
	ol := OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.leaseID, Kind: o.Kind.String(), At: now}
	cp, err := e.checkpointOf(it, o, now)
	if err != nil {
		ol.Err = err.Error()
		e.log_.outcome(ol)
		return
	}
	ol.Checkpoint = cp.ID
	p := &protocol.CheckpointWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.epoch, LeaseID: it.leaseID, CheckpointID: cp.ID,
		StateDigest: cp.Digest, Progress: e.progressOf(it, now), Reason: protocol.CheckpointPreempted}
	if e.mon.State() == offline.StateOffline {
		if err := e.bufferProgress(it, protocol.CmdWorkCheckpoint, p, now); err == nil {
			ol.Sent = "buffered " + string(protocol.CmdWorkCheckpoint)
			e.log_.outcome(ol)
			e.releaseAfterCheckpoint(it, now)
			it.phase = phQueued // held until the reconciled checkpoint shows
			return
		}
	}
	e.queueCmd(it, protocol.CmdWorkCheckpoint, p)
	ol.Sent = string(protocol.CmdWorkCheckpoint)
	e.log_.outcome(ol)
}

// releaseAfterCheckpoint returns a preempted item to its Group queue once
// its checkpoint is emitted (sent and answered, or durably buffered): the
// scheduler hands the freed slot to the item the preemption was for. The
// item is held until its view shows it queued again.
func (e *engine) releaseAfterCheckpoint(it *item, now time.Time) {
	e.endRun(it, true, now)
	it.hold = true
	e.holdGate(it, now)
}

// onPublish sends artifact.publish in the item's command order.
func (e *engine) onPublish(m msgPublish) {
	it := e.items[m.key]
	if it == nil || it.leaseID != m.leaseID {
		return
	}
	e.queueCmd(it, protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m.m,
		OwnershipEpoch: protocol.Uint64(it.epoch), LeaseID: it.leaseID})
}

// onState follows the connection: offline, no new starts; connected,
// reconcile the offline buffer before anything else (spec 11.5).
func (e *engine) onState(sc client.StateChange, now time.Time) {
	if sc.State != client.StateGroupRejected { // not a connection state
		e.connState = sc.State
	}
	switch sc.State {
	case client.StateConnected:
		e.w.m.reconnects.Inc()
		if since := e.w.offlineSince(); !since.IsZero() {
			e.log.Info("reconnected to the authority; reconciling", "offlineFor", now.Sub(since).Round(time.Millisecond))
		} else {
			e.log.Info("connected to the authority")
		}
		e.mon.Connected(now)
		if !e.reconciling {
			e.reconciling = true
			members := maps.Clone(e.members)
			go e.reconcile(members)
		}
	case client.StateDisconnected:
		e.mon.Disconnected(now)
		e.sched.SetOffline(true)
		e.setOnline(false)
		if e.w.offlineSince().IsZero() {
			e.w.setOffline(now)
		}
	case client.StateGroupRejected:
		// Not (yet) a member: subscribe again later, the membership may
		// come after the worker starts.
		n := e.rejections[sc.GroupID]
		e.rejections[sc.GroupID] = n + 1
		wait := retryBackoff(e.cfg.Tick, n)
		e.rejected[sc.GroupID] = now.Add(wait)
		switch {
		case n == 0:
			e.log.Warn("group rejected; subscribing again with back-off", "group", sc.GroupID, "err", sc.Err, "retryIn", wait)
		case n&(n+1) == 0: // 1, 3, 7, 15, ... refusals: a line at each doubling
			e.log.Info("group still rejected", "group", sc.GroupID, "refusals", n+1, "err", sc.Err, "retryIn", wait)
		default:
			e.log.Debug("group still rejected", "group", sc.GroupID, "refusals", n+1, "err", sc.Err, "retryIn", wait)
		}
	}
}

func (e *engine) setOnline(v bool) {
	e.shared.mu.Lock()
	e.shared.online = v
	e.shared.mu.Unlock()
}

// reconcile sends every buffered command, in order, rebased on the current
// session, and settles each by the authority's answer (offline.Classify).
func (e *engine) reconcile(members map[string]uint64) {
	var logs []ReconcileLog
	entries, err := e.buf.Pending()
	for _, en := range entries {
		if err != nil {
			break
		}
		l := ReconcileLog{ActionID: en.ActionID, Type: string(en.Type)}
		for attempt := 0; attempt < 4; attempt++ {
			raw, perr := e.buf.Prepare(en.ID, offline.CurrentSession{SessionEpoch: e.sess.epoch, MembershipEpochs: members, Now: e.cfg.Clock.Now()}, e.cfg.Key)
			if perr != nil {
				l.Outcome, l.Err = offline.Refused.String(), perr.Error()
				_ = e.buf.Remove(en.ID)
				break
			}
			_, serr := e.client.Send(e.sendCtx, raw)
			out := offline.Classify(serr)
			l.Outcome = out.String()
			if serr != nil {
				l.Err = serr.Error()
			}
			if out == offline.Applied || out == offline.Refused {
				err = e.buf.Remove(en.ID)
				break
			}
			if e.sendCtx.Err() != nil {
				err = e.sendCtx.Err()
				break
			}
			if out == offline.Resend {
				select {
				case <-e.sendCtx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		logs = append(logs, l)
	}
	e.mb.post(msgReconciled{logs: logs, err: err})
}

// onReconciled resumes normal operation: starts, held outcomes, commands.
func (e *engine) onReconciled(m msgReconciled, now time.Time) {
	e.reconciling = false
	e.log_.addReconciled(m.logs)
	if m.err != nil {
		e.log.Warn("reconciliation incomplete", "err", m.err)
	}
	if e.connState != client.StateConnected {
		return // disconnected again: the next connection reconciles
	}
	settled := false
	for _, l := range m.logs {
		settled = settled || l.Outcome == offline.Applied.String() || l.Outcome == offline.Refused.String()
	}
	if n, _, _ := e.buf.Len(); n > 0 {
		if settled {
			e.reconciling = true // appended meanwhile: settle those first
			go e.reconcile(maps.Clone(e.members))
			return
		}
		e.log.Warn("buffered commands left unsettled until the next connection", "commands", n)
	}
	e.mon.Reconciled(now)
	e.w.setOffline(time.Time{})
	e.sched.SetOffline(false)
	e.scheduleChanged() // capacity is no longer offline; queued notices go out
	e.setOnline(true)
	held := e.held
	e.held = nil
	for _, h := range held {
		if it := e.items[h.key]; it != nil {
			e.sendOutcome(it, h.o, now)
		}
	}
	for _, it := range e.items {
		e.pump(it)
	}
}

// retryBackoff is the wait before trying again after n failures in a row
// (a Group refused by SUBSCRIBE, a command not applied): two ticks,
// doubling, at most a minute (a membership usually comes soon after the
// worker starts, or not for a long time; a failing authority is not
// hammered).
func retryBackoff(tick time.Duration, n int) time.Duration {
	d := 2 * tick
	for i := 0; i < n && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

// maxRetryBackoff bounds retryBackoff.
const maxRetryBackoff = time.Minute
