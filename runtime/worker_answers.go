package runtime

import (
	"errors"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// What the worker does with an answer that is not a plain success: send
// the same command again, build it again, or decide what a refusal means
// for the item.

// again keeps a command at the head of its item's chain when the answer
// calls for sending it again, and reports whether it did. INTERNAL_ERROR
// (the authority failed without accepting the transition) and a lost
// answer are retryable (spec 19): the same signed bytes go again after a
// back-off, so a command the authority did apply is answered with its
// first receipt. A command whose freshness window passed before it could
// be sent (client.ErrStale), or signed with a membership epoch the Group
// has moved past, or refused as ACTION_ID_COLLISION, is built again: a
// new actionId, issuedAt and signature for the same intent. A
// REVISION_CONFLICT is held until the projection has caught up
// (worker_revision.go).
func (e *engine) again(it *item, m msgSent, now time.Time) bool {
	if len(it.cmds) == 0 || it.cmds[0] != m.cmd || m.err == nil {
		return false
	}
	c, code := m.cmd, protocol.CodeOf(m.err)
	lost := !answered(m.err) && e.sendCtx.Err() == nil && !errors.Is(m.err, client.ErrNotRunning)
	switch {
	case code == protocol.CodeRevisionConflict && revisioned(m.typ):
		e.conflicted(it, m, now)
		return true
	case code == protocol.CodeMembershipStale:
		e.log.Info("command refused for a stale membership epoch; resending with the next", "type", m.typ, "item", m.key.sched(), "epoch", m.mepoch)
		c.raw, it.staleMembership = nil, m.mepoch
	case code == protocol.CodeActionIDCollision:
		// The actionId is taken by other content (spec 19): the same
		// intent goes as a new command, never the same bytes again.
		e.log.Warn("command refused for a used actionId; building it again", "type", m.typ, "item", m.key.sched(), "err", m.err)
		c.raw = nil
	case errors.Is(m.err, client.ErrStale):
		e.log.Info("command not sent within its freshness window; building it again", "type", m.typ, "item", m.key.sched())
		c.raw = nil
	case code == protocol.CodeAuthInvalidSignature && detail(m.err, "pointer") == "/issuedAt":
		// The authority's clock and this worker's disagree by more than
		// its skew (one of them stepped): the command is sound, its time
		// is not, and nothing about the item is decided by it. Built
		// again after a back-off, it goes through once they agree.
		wait := retryBackoff(e.cfg.Tick, c.tries)
		c.tries++
		c.raw, c.retryAt = nil, now.Add(wait)
		e.log.Warn("command refused for its issuedAt: this worker's clock and the authority's disagree; building it again", "type", m.typ,
			"item", m.key.sched(), "err", m.err, "tries", c.tries, "retryIn", wait)
	case (answered(m.err) && code.Retryable()) || lost:
		wait := retryBackoff(e.cfg.Tick, c.tries)
		c.tries++
		c.retryAt = now.Add(wait)
		e.log.Warn("command not applied; sending it again", "type", m.typ, "item", m.key.sched(), "err", m.err, "tries", c.tries, "retryIn", wait)
	default:
		return false
	}
	e.pump(it)
	return true
}

// due reports whether a command's back-off has passed: also when its end
// lies further ahead than any back-off, after the clock stepped back.
func (c *itemCmd) due(now time.Time) bool {
	return !now.Before(c.retryAt) || c.retryAt.Sub(now) > maxRetryBackoff
}

// answered reports whether err is the authority's answer (a protocol
// error), not a send that ended without one.
func answered(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe)
}

// retryDue pumps the items whose command back-off has passed.
func (e *engine) retryDue(now time.Time) {
	for _, it := range e.items {
		if len(it.cmds) > 0 && !it.sending && !it.cmds[0].retryAt.IsZero() && it.cmds[0].due(now) {
			e.pump(it)
		}
	}
}

// The decisions on a refused work.submit, as Status records them.
const (
	SubmitFailed    = "failed"     // work.fail sent with the refusal as its reason
	SubmitLeaseLost = "lease lost" // fenced: the result is late, nothing more is sent
	SubmitMovedOn   = "moved on"   // the item left active: nothing to release
)

// submitRefused decides what a run whose submission the authority refused
// needs. Fenced (the lease or ownership is gone), the run stops there: the
// result is late and kept for audit. A submission the authority judged
// unacceptable (no artifacts, evidence that does not cover the acceptance
// criteria, a payload it refuses) while the lease is still ours fails the
// run with that reason, which releases the item to its coordinator (spec
// 11.4) instead of leaving it active until the lease lapses. Refused for
// the item's state, the item has moved on (cancelled, blocked): nothing to
// send. Status records the decision with the refusal.
func (e *engine) submitRefused(it *item, m msgSent, now time.Time) {
	code := protocol.CodeOf(m.err)
	p, _ := m.payload.(*protocol.SubmitWorkPayload)
	decision := SubmitFailed
	switch code {
	case protocol.CodeWorkStaleOwnership, protocol.CodeWorkLeaseExpired, protocol.CodeAuthForbidden:
		decision = SubmitLeaseLost
	case protocol.CodeInvalidStateTransition, protocol.CodeRevisionConflict:
		// A conflict is settled here only once the projection shows the
		// submission no longer applies (worker_revision.go).
		decision = SubmitMovedOn
	}
	// The pointer names the field at fault (it arrives in the error's
	// details over the wire, where the message alone does not say it).
	e.log.Warn("submission refused", "item", it.key.sched(), "code", code, "pointer", protocol.PointerOf(m.err), "err", refusalText(m.err), "decision", decision)
	e.log_.decided(it.key, string(protocol.CmdWorkSubmit), decision)
	if decision != SubmitFailed || p == nil {
		return
	}
	e.queueCmd(it, protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: p.WorkItemID,
		Reason:   "submission refused: " + refusalText(m.err),
		Evidence: failureEvidence(p.WorkItemID, e.cfg.AgentID, now), OwnershipEpoch: protocol.Uint64(p.OwnershipEpoch), LeaseID: p.LeaseID})
}

// refusalText is err's text, naming the JSON pointer of a refusal
// received over the wire (where it travels in the details) as
// protocol.Error names its own: CODE: POINTER: message.
func refusalText(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Pointer == "" {
		if ptr := protocol.PointerOf(err); ptr != "" {
			c := *pe
			c.Pointer = ptr
			return c.Error()
		}
	}
	return err.Error()
}
