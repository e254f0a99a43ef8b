package item

import (
	"errors"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Step is the item's lifecycle: the item, one input and the time in; the
// item as it is now and what the engine must do, in order, out. It reads
// no clock, store or connection: what it needs of them comes in the input.
func Step(it Item, in Input, now time.Time) (Item, []Effect) {
	switch in := in.(type) {
	case Answered:
		return answered(it, in, now)
	case RunEnded:
		return runEnded(it, in, now)
	case Reconciled:
		return reconciled(it, in, now)
	case Due:
		return due(it, in, now)
	case Viewed:
		return viewed(it, in, now)
	case Launched:
		return launched(it, in, now)
	case Offered:
		return offeredTo(it, in)
	case Renewal:
		return renewal(it, in, now)
	case Picked:
		return picked(it, in)
	case Ticked:
		return ticked(it, in, now)
	case PreemptAsked:
		return preemptAsked(it, in, now)
	case StartFailed:
		return startFailed(it, in, now)
	}
	return it, nil
}

// IsAnswer reports whether err is the authority's answer (a protocol
// error), not a send that ended without one.
func IsAnswer(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe)
}

// Detail is one member of a protocol error's details, as a string.
func Detail(err error, key string) string {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return ""
	}
	s, _ := pe.Details[key].(string)
	return s
}

// fencedCode reports a refusal for a lease or ownership that is gone.
func fencedCode(code protocol.Code) bool {
	return code == protocol.CodeWorkStaleOwnership || code == protocol.CodeWorkLeaseExpired || code == protocol.CodeAuthForbidden
}

// MaxRetryBackoff bounds RetryBackoff.
const MaxRetryBackoff = time.Minute

// RetryBackoff is the wait before trying again after n failures in a row
// (a Group refused by SUBSCRIBE, a command not applied): two ticks,
// doubling, at most a minute (a membership usually comes soon after the
// worker starts, or not for a long time; a failing authority is not
// hammered).
func RetryBackoff(tick time.Duration, n int) time.Duration {
	d := 2 * tick
	for i := 0; i < n && d < MaxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, MaxRetryBackoff)
}

// FailureEvidence is the evidence of a work.fail the worker writes itself:
// one failure record about subject.
func FailureEvidence(subject, agentID string, now time.Time) protocol.List[protocol.Evidence] {
	return protocol.List[protocol.Evidence]{{Subject: subject, Criteria: protocol.List[string]{protocol.CriterionFailure},
		Method: "worker-runtime", Result: protocol.EvidenceFail, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: agentID},
		Timestamp: protocol.NewTime(now), Artifacts: protocol.List[string]{}}}
}

// RefusalText is err's text, naming the JSON pointer of a refusal
// received over the wire (where it travels in the details) as
// protocol.Error names its own: CODE: POINTER: message.
func RefusalText(err error) string {
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

// due decides whether the head command goes out: a submission, block or
// failure under a lease the worker's own clock has ended is withheld (the
// authority's clock may be behind and still take it; the worker does not
// hold that lease any more).
func due(it Item, in Due, now time.Time) (Item, []Effect) {
	if why := waitFor(it, in, now); why != "" {
		return it, []Effect{Wait{Why: why}}
	}
	if in.Expires.After(it.Expires) {
		it.Expires = in.Expires
	}
	switch in.Type {
	case protocol.CmdWorkSubmit, protocol.CmdWorkBlock, protocol.CmdWorkFail:
		if l := LeaseOf(in.Payload); l != "" && l == it.LeaseID && it.LeaseOver(in.Online, now) {
			return it, []Effect{Withhold{Why: "the lease has ended by this worker's clock"}}
		}
	}
	return it, nil
}

// Wait keeps the head command unsent for now: the loop tries again when
// what it waits for arrives (a view, an answer, the back-off's end).
type Wait struct{ Why string }

func (Wait) effect() {}

// waitFor is why the head command may not go yet, "" when it may: a Group
// command needs the worker's current membership epoch (none known yet, or
// the one the authority just called stale: the next view brings it); a
// held revision conflict is decided first; a revisioned command waits
// until the projection has the events of the item's previous one (spec
// 15.3), so the worker does not conflict with itself; a retry waits out
// its back-off (one set further than MaxRetryBackoff ahead is a clock that
// stepped back, and does not hold the command).
func waitFor(it Item, in Due, now time.Time) string {
	switch {
	case in.Membership == 0:
		return "membership"
	case in.Membership == it.StaleMembership:
		return "stale-membership"
	case in.Conflicted:
		return "conflict"
	case it.AwaitSeq > 0 && Revisioned(in.Type) && in.Cursor < it.AwaitSeq:
		return "own-events"
	case now.Before(in.RetryAt) && in.RetryAt.Sub(now) <= MaxRetryBackoff:
		return "back-off"
	}
	return ""
}
