package runtime

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/slots"
)

// heldOutcome is a run's end that needs the authority (submission, block,
// failure) while the worker is offline or reconciling.
type heldOutcome struct {
	key itemKey
	o   slots.Outcome
}

// onOutcome feeds a run's end to the item's lifecycle (lc.Step), which
// frees its scheduler slot and decides what the outcome calls for (spec
// 11.3, 11.4), and carries that out.
func (e *engine) onOutcome(o slots.Outcome, now time.Time) {
	k := itemKey{o.Slot.GroupID, o.Slot.WorkItemID}
	it := e.items[k]
	if it == nil || it.LeaseID != o.Slot.LeaseID {
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
	e.log.Log(context.Background(), level, "run ended", "group", k.group, "item", k.id, "lease", it.LeaseID, "outcome", o.Kind, "reason", o.Reason, "err", o.Err)
	e.w.m.runs.WithLabelValues(o.Kind.String()).Inc()
	it.slot = -1
	var effs []lc.Effect
	it.Item, effs = lc.Step(it.core(), e.runEnded(o), now)
	e.carry(it, cause{o: &o}, effs, now)
}

// runEnded is a slot's outcome as the lifecycle's input.
func (e *engine) runEnded(o slots.Outcome) lc.RunEnded {
	ev := o.Evidence
	if o.Kind == slots.Completed {
		ev = o.Result.Evidence
	}
	return lc.RunEnded{End: o.Kind, Artifacts: o.Result.Artifacts, Evidence: ev, Reason: o.Reason, Progress: o.Progress,
		AgentID: e.cfg.AgentID, Online: e.mon.State() == stateOnline, Draining: e.draining}
}

// sendBlock sends work.block for a blocked run, naming its checkpoint.
func (e *engine) sendBlock(it *item, o slots.Outcome, now time.Time) {
	k := it.key
	ol := OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.LeaseID, Kind: o.Kind.String(), At: now}
	cp, err := e.checkpointOf(it, o, now)
	if err != nil {
		ol.Err = err.Error()
		e.log_.outcome(ol)
		return
	}
	res := protocol.Resolution{Kind: protocol.ResolutionOther, Detail: "blocked"}
	if o.Resolution != nil {
		res = *o.Resolution
	}
	e.queueCmd(it, protocol.CmdWorkBlock, &protocol.BlockWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.Epoch, LeaseID: it.LeaseID,
		CheckpointID: cp.ID, StateDigest: cp.Digest, Resolution: res, Progress: o.Progress})
	ol.Sent, ol.Checkpoint = string(protocol.CmdWorkBlock), cp.ID
	e.log_.outcome(ol)
}

// sendCheckpoint sends (or, offline, buffers) work.checkpoint for a
// preempted run: the durable progress that releases the execution lease
// and returns the item to its Group queue (spec 11.3).
func (e *engine) sendCheckpoint(it *item, o slots.Outcome, now time.Time) {
	k := it.key
	ol := OutcomeLog{GroupID: k.group, WorkItemID: k.id, LeaseID: it.LeaseID, Kind: o.Kind.String(), At: now}
	cp, err := e.checkpointOf(it, o, now)
	if err != nil {
		ol.Err = err.Error()
		e.log_.outcome(ol)
		return
	}
	ol.Checkpoint = cp.ID
	p := &protocol.CheckpointWorkPayload{WorkItemID: k.id, OwnershipEpoch: it.Epoch, LeaseID: it.LeaseID, CheckpointID: cp.ID,
		StateDigest: cp.Digest, Progress: e.progressOf(it, now), Reason: protocol.CheckpointPreempted}
	if e.mon.State() == offline.StateOffline {
		if err := e.bufferProgress(it, protocol.CmdWorkCheckpoint, p, now); err == nil {
			ol.Sent = "buffered " + string(protocol.CmdWorkCheckpoint)
			e.log_.outcome(ol)
			e.releaseAfterCheckpoint(it, now)
			it.Phase = phQueued // held until the reconciled checkpoint shows
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
	it.Hold = true
	e.holdGate(it, now)
}

// onPublish sends artifact.publish in the item's command order.
func (e *engine) onPublish(m msgPublish) {
	it := e.items[m.key]
	if it == nil || it.LeaseID != m.leaseID {
		return
	}
	e.queueCmd(it, protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m.m,
		OwnershipEpoch: protocol.Uint64(it.Epoch), LeaseID: it.LeaseID})
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
			in := lc.Reconciled{Run: e.runEnded(h.o), Expires: e.leaseExpiry(it)}
			var effs []lc.Effect
			it.Item, effs = lc.Step(it.core(), in, now)
			e.carry(it, cause{o: &h.o}, effs, now)
		}
	}
	for _, it := range e.items {
		e.pump(it)
	}
}

// retryBackoff is the wait before trying again after n failures in a row
// (lc.RetryBackoff).
func retryBackoff(tick time.Duration, n int) time.Duration { return lc.RetryBackoff(tick, n) }

// maxRetryBackoff bounds retryBackoff.
const maxRetryBackoff = lc.MaxRetryBackoff
