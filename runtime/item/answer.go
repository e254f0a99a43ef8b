package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The decisions on the submission the authority refused, as Status
// records them.
const (
	SubmitFailed    = "failed"     // work.fail sent with the refusal as its reason
	SubmitLeaseLost = "lease lost" // fenced, or the lease ended: the result is late, nothing more is sent
	SubmitMovedOn   = "moved on"   // the item left active: nothing to release
)

// answered decides what an answer calls for: the command again (same
// bytes or built again), a conflict held, or the answer settled.
func answered(it Item, a Answered, now time.Time) (Item, []Effect) {
	if a.Head && a.Err != nil && !a.Decided {
		if e, ok := again(a); ok {
			if ag, _ := e.(Again); ag.StaleMembership != 0 {
				it.StaleMembership = ag.StaleMembership
			}
			return it, []Effect{e}
		}
	}
	return settle(it, a, now)
}

// again reports whether the answer calls for sending the command again.
// INTERNAL_ERROR (the authority failed without accepting the transition)
// and a lost answer are retryable (spec 19): the same signed bytes go
// again after a back-off, so a command the authority did apply is
// answered with its first receipt. A command whose freshness window passed
// before it could be sent, or signed with a membership epoch the Group has
// moved past, or refused as ACTION_ID_COLLISION, is built again: a new
// actionId, issuedAt and signature for the same intent. A
// REVISION_CONFLICT is held until the projection has caught up.
func again(a Answered) (Effect, bool) {
	code := protocol.CodeOf(a.Err)
	lost := !IsAnswer(a.Err) && !a.Stopping
	wait := RetryBackoff(a.Tick, a.Tries)
	switch {
	case code == protocol.CodeRevisionConflict && Revisioned(a.Type):
		return HoldConflict{}, true
	case code == protocol.CodeMembershipStale:
		return Again{Rebuild: true, Tries: a.Tries, StaleMembership: a.MembershipEpoch, Why: "membership"}, true
	case code == protocol.CodeActionIDCollision:
		// The actionId is taken by other content (spec 19): the same
		// intent goes as a new command, never the same bytes again.
		return Again{Rebuild: true, Tries: a.Tries, Why: "collision"}, true
	case a.Stale:
		return Again{Rebuild: true, Tries: a.Tries, Why: "stale"}, true
	case code == protocol.CodeAuthInvalidSignature && Detail(a.Err, "pointer") == "/issuedAt":
		// The authority's clock and this worker's disagree by more than
		// its skew (one of them stepped): the command is sound, its time
		// is not. Built again after a back-off, it goes through once they
		// agree.
		return Again{Rebuild: true, Wait: wait, Tries: a.Tries + 1, Why: "issuedAt"}, true
	case (IsAnswer(a.Err) && code.Retryable()) || lost:
		return Again{Wait: wait, Tries: a.Tries + 1, Why: "retryable"}, true
	}
	return nil, false
}

// settle takes an answered command off the chain and does what the
// answer calls for.
func settle(it Item, a Answered, now time.Time) (Item, []Effect) {
	out := []Effect{Settled{}}
	if a.Err != nil && !IsAnswer(a.Err) {
		// No answer (the worker is stopping, or its connection is gone
		// for good): nothing was refused, and the command stays in the
		// outbox for the next run.
		return it, append(out, Unanswered{}, Next{})
	}
	// From here on a.Err is nil or the authority's answer.
	code := protocol.CodeOf(a.Err)
	if a.Err == nil {
		out = append(out, Applied{})
	} else {
		out = append(out, Refused{Code: code})
		if code == protocol.CodeAuthStaleSession {
			out = append(out, SessionReplaced{})
		}
	}
	if fencedCode(code) {
		out = append(out, Fenced{Code: code})
	}
	var more []Effect
	switch a.Type {
	case protocol.CmdWorkAcceptOffer:
		it, more = acceptAnswered(it, a)
	case protocol.CmdWorkStart:
		it, more = startAnswered(it, a)
	case protocol.CmdLeaseRenew:
		it.Renewing, it.RetryAt = false, now.Add(a.Tick)
		more = []Effect{RenewAnswered{OK: a.Err == nil}}
		if a.Err != nil && fencedCode(code) && it.Phase == Running {
			more = append(more, LoseLease{Why: "renewal refused: " + string(code)})
		}
	case protocol.CmdWorkCheckpoint:
		// The checkpoint is emitted: the slot goes to the item the
		// preemption was for, and the item waits, held, until its view
		// shows it queued again.
		more = []Effect{LogSent{}, ReleaseAfterCheckpoint{}}
		it.Hold = true
		if it.Phase == Finishing && a.Err == nil && !a.Draining {
			it.Phase, it.Hold = Queued, false
			more = append(more, Sync{})
		}
	case protocol.CmdWorkSubmit:
		more = []Effect{LogSent{}}
		if a.Err == nil {
			more = append(more, Track{Success: true})
		} else {
			more = append(more, submitRefused(it, a, now)...)
		}
	case protocol.CmdWorkBlock, protocol.CmdWorkFail:
		more = []Effect{LogSent{}}
	case protocol.CmdArtifactPublish:
		if a.Err != nil {
			more = []Effect{PublishRefused{}}
		}
	}
	out = append(out, more...)
	return it, append(out, Next{})
}

// acceptAnswered settles work.accept_offer: an offer's acceptance while
// accepting, else a renewed acceptance.
func acceptAnswered(it Item, a Answered) (Item, []Effect) {
	if p, _ := a.Payload.(*protocol.AcceptOfferPayload); p != nil && it.Phase != Accepting {
		return renewalAnswered(it, p.ContractRevision, a.Err)
	}
	if a.Err == nil {
		return it, nil
	}
	out := []Effect{AdmissionRefused{}}
	if protocol.CodeOf(a.Err) == protocol.CodeRevisionConflict && it.Phase == Accepting {
		// The contract was revised while the acceptance was out: judge
		// the offer again on the revised contract.
		return it, append(out, Drop{}, Sync{IfForgotten: true})
	}
	return it, append(out, RefuseOffer{OfferID: it.OfferID}, Drop{})
}

// renewalAnswered settles a renewed acceptance (spec 10.1). Accepted (or
// already recorded: WORK_ALREADY_OWNED answers an owner whose accepted
// revision is current), the item may start. Refused, it stays held and
// is not sent again for that revision: a newer revision in between
// (REVISION_CONFLICT) is judged when its event arrives, and any other
// refusal ends when the authority moves the item.
func renewalAnswered(it Item, rev uint64, err error) (Item, []Effect) {
	if err != nil && protocol.CodeOf(err) != protocol.CodeWorkAlreadyOwned {
		return it, []Effect{RenewalRefused{Revision: rev}}
	}
	it.Reaccepted = max(it.Reaccepted, rev)
	if it.Reaccepting == rev {
		it.Reaccepting = 0
	}
	if it.Phase == Queued {
		return it, []Effect{Sync{}}
	}
	return it, nil
}

// startAnswered settles work.start. Applied, the lease may already be in
// the store. Fenced, the item is no longer ours. Refused for want of a
// renewed acceptance the view did not show, it renews and then starts.
// Otherwise it is not startable now (dependencies, approval, deadline):
// back to its queue, held until its view changes.
//
// A send that got no answer never reaches here: the answer is retried
// while the worker runs (again), and settle returns early while it stops.
// So every refusal here is the authority's.
func startAnswered(it Item, a Answered) (Item, []Effect) {
	if it.Phase != Starting {
		return it, nil
	}
	if a.Err == nil {
		return it, []Effect{Sync{}}
	}
	if fencedCode(protocol.CodeOf(a.Err)) {
		return it, []Effect{EndRun{}, Drop{}}
	}
	if Detail(a.Err, "reason") == "renewed_acceptance_required" {
		it.Phase, it.ForceRenew = Queued, true
		return it, []Effect{EndRun{Requeue: true}, Sync{}}
	}
	it.Phase, it.Hold = Queued, true
	return it, []Effect{EndRun{Requeue: true}, HoldGate{}}
}

// submitRefused decides what a run whose submission the authority refused
// needs. Fenced (the lease or ownership is gone), the run stops there: the
// result is late and kept for audit. A submission the authority judged
// unacceptable (no artifacts, evidence that does not cover the acceptance
// criteria, a payload it refuses) while the lease is still ours fails the
// run with that reason, which releases the item to its coordinator (spec
// 11.4) instead of leaving it active until the lease lapses; once the
// worker's clock has ended the lease, nothing is sent under it. Refused
// for the item's state, the item has moved on (cancelled, blocked).
func submitRefused(it Item, a Answered, now time.Time) []Effect {
	code := protocol.CodeOf(a.Err)
	p, _ := a.Payload.(*protocol.SubmitWorkPayload)
	decision := SubmitFailed
	switch {
	case fencedCode(code):
		decision = SubmitLeaseLost
	case code == protocol.CodeInvalidStateTransition || code == protocol.CodeRevisionConflict:
		// A conflict is settled here only once the projection shows the
		// submission no longer applies.
		decision = SubmitMovedOn
	case p != nil && p.LeaseID == it.LeaseID && it.LeaseOver(a.Online, now):
		decision = SubmitLeaseLost
	}
	out := []Effect{Decided{Type: protocol.CmdWorkSubmit, Decision: decision}}
	if decision != SubmitFailed || p == nil {
		return out
	}
	return append(out, Send{Type: protocol.CmdWorkFail, Payload: &protocol.FailWorkPayload{WorkItemID: p.WorkItemID,
		Reason: "submission refused: " + RefusalText(a.Err), Evidence: FailureEvidence(p.WorkItemID, a.AgentID, now),
		OwnershipEpoch: protocol.Uint64(p.OwnershipEpoch), LeaseID: p.LeaseID}})
}
