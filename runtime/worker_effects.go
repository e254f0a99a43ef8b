package runtime

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/slots"
)

// cause is the input an item's effects answer: a command's answer or a
// run's outcome (what the engine keeps beside what lc.Step was told:
// signed bytes, receipt, checkpoint).
type cause struct {
	m *msgSent
	o *slots.Outcome
}

// carry carries out, in order, what lc.Step decided for it. Step has
// changed it.Item already.
func (e *engine) carry(it *item, c cause, effs []lc.Effect, now time.Time) {
	for _, ef := range effs {
		if c.m != nil && e.carryAnswer(it, *c.m, ef, now) {
			continue
		}
		if c.o != nil && e.carryOutcome(it, *c.o, ef, now) {
			continue
		}
		e.carryItem(it, ef, now)
	}
}

// carryItem carries out the effects that need no more than the item.
func (e *engine) carryItem(it *item, ef lc.Effect, now time.Time) {
	switch ef := ef.(type) {
	case lc.Drop:
		e.drop(it)
	case lc.Forget:
		e.forget(it)
	case lc.Sync:
		if !ef.IfForgotten || e.items[it.key] == nil {
			e.sync(it.key)
		}
	case lc.EndRun:
		e.endRun(it, ef.Requeue, now)
	case lc.HoldGate:
		e.holdGate(it, now)
	case lc.LoseLease:
		e.leaseLost(it, ef.Why, now)
	case lc.Track:
		e.track(it, ef.Success)
	case lc.Send:
		e.queueCmd(it, ef.Type, ef.Payload)
	case lc.Next:
		e.next(it)
	case lc.RefuseOffer:
		e.refused[it.key] = lc.Refusal{OfferID: ef.OfferID}
	case lc.ObserveRun:
		e.observeRun(it, now)
	case lc.ReleaseOffline:
		e.mon.Release(offlineItem(it.key))
	case lc.Outcome:
		e.log_.outcome(OutcomeLog{GroupID: it.key.group, WorkItemID: it.key.id, LeaseID: it.LeaseID, Kind: ef.End.String(), Sent: ef.Sent, At: now})
	default:
		e.log.Error("effect not carried out", "item", it.key.sched(), "effect", ef)
	}
}

// carryAnswer carries out the effects that read the answered command.
func (e *engine) carryAnswer(it *item, m msgSent, ef lc.Effect, now time.Time) bool {
	switch ef := ef.(type) {
	case lc.Again:
		e.again(it, m, ef, now)
	case lc.HoldConflict:
		e.conflicted(it, m, now)
	case lc.Settled:
		if len(it.cmds) > 0 && it.cmds[0] == m.cmd {
			it.cmds = it.cmds[1:]
		}
	case lc.Unanswered:
		e.log.Info("command unanswered", "type", m.typ, "item", m.key.sched(), "err", m.err)
	case lc.Applied:
		it.sentApplied(m.receipt)
	case lc.Refused:
		e.log.Info("command refused", "type", m.typ, "item", m.key.sched(), "err", m.err)
	case lc.SessionReplaced:
		if e.fatal == nil {
			e.fatal = errSessionReplacedBy(m.err)
		}
	case lc.Fenced:
		e.w.m.fenced.WithLabelValues(string(ef.Code)).Inc()
	case lc.AdmissionRefused:
		e.log_.admissionErr(m.key, it.OfferID, m.err)
	case lc.RenewalRefused:
		e.log.Warn("renewed acceptance refused", "item", it.key.sched(), "contractRevision", ef.Revision, "err", m.err)
	case lc.RenewAnswered:
		if ef.OK {
			it.renewals++
			e.w.m.renewals.WithLabelValues("renewed").Inc()
		} else {
			e.w.m.renewals.WithLabelValues("refused").Inc()
		}
	case lc.LogSent:
		e.log_.sent(m.key, string(m.typ), m.err)
	case lc.ReleaseAfterCheckpoint:
		e.endRun(it, true, now)
		e.holdGate(it, now)
	case lc.Decided:
		// The pointer names the field at fault (it arrives in the error's
		// details over the wire, where the message alone does not say it).
		e.log.Warn("submission refused", "item", it.key.sched(), "code", protocol.CodeOf(m.err), "pointer", protocol.PointerOf(m.err),
			"err", refusalText(m.err), "decision", ef.Decision)
		e.log_.decided(it.key, string(ef.Type), ef.Decision)
	case lc.PublishRefused:
		e.log.Warn("artifact.publish refused", "item", m.key.sched(), "err", m.err)
	default:
		return false
	}
	return true
}

// again keeps the answered command at the head of its chain and sends it
// again as lc decided: the same bytes, or built anew.
func (e *engine) again(it *item, m msgSent, a lc.Again, now time.Time) {
	c := m.cmd
	c.tries = a.Tries
	if a.Rebuild {
		c.raw = nil
	}
	if a.Wait > 0 {
		c.retryAt = now.Add(a.Wait)
	}
	switch a.Why {
	case "membership":
		it.StaleMembership = a.StaleMembership
		e.log.Info("command refused for a stale membership epoch; resending with the next", "type", m.typ, "item", m.key.sched(), "epoch", m.mepoch)
	case "collision":
		e.log.Warn("command refused for a used actionId; building it again", "type", m.typ, "item", m.key.sched(), "err", m.err)
	case "stale":
		e.log.Info("command not sent within its freshness window; building it again", "type", m.typ, "item", m.key.sched())
	case "issuedAt":
		e.log.Warn("command refused for its issuedAt: this worker's clock and the authority's disagree; building it again", "type", m.typ,
			"item", m.key.sched(), "err", m.err, "tries", c.tries, "retryIn", a.Wait)
	default:
		e.log.Warn("command not applied; sending it again", "type", m.typ, "item", m.key.sched(), "err", m.err, "tries", c.tries, "retryIn", a.Wait)
	}
	e.pump(it)
}

// carryOutcome carries out the effects that read the run's outcome.
func (e *engine) carryOutcome(it *item, o slots.Outcome, ef lc.Effect, now time.Time) bool {
	switch ef.(type) {
	case lc.Checkpoint:
		// The slot is handed over only once the checkpoint is emitted
		// (spec 11.3): see releaseAfterCheckpoint.
		e.sendCheckpoint(it, o, now)
	case lc.Block:
		e.sendBlock(it, o, now)
	case lc.Late:
		// The run ended as its lease did: its result is late, kept for
		// audit and never sent.
		e.log.Warn("run ended after its lease: the outcome is not sent", "item", it.key.sched(), "lease", it.LeaseID, "outcome", o.Kind)
	case lc.HoldOutcome:
		e.held = append(e.held, heldOutcome{it.key, o})
	default:
		return false
	}
	return true
}
