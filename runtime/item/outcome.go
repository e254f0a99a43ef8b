package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// runEnded frees the run's scheduler slot and sends what the outcome calls
// for (spec 11.3, 11.4): a checkpoint for a preempted run (the slot is
// handed over once it is emitted), the submission, block or failure of
// the others, held while the worker is offline. A run that ended as its
// lease did (the authority fenced it, or the worker's clock ended it) is
// late: kept for audit, never sent.
func runEnded(it Item, r RunEnded, now time.Time) (Item, []Effect) {
	var out []Effect
	if r.End != LeaseLost && r.End != Preempted && (it.Lost || it.LeaseOver(r.Online, now)) {
		out = append(out, Late{})
		r.End = LeaseLost
	}
	it.Phase = Finishing
	if r.End != Preempted {
		out = append(out, Track{})
	}
	if r.End == Completed {
		out = append(out, ObserveRun{})
	}
	switch r.End {
	case Preempted:
		out = append(out, Checkpoint{})
	case LeaseLost:
		out = append(out, EndRun{}, Outcome{End: LeaseLost})
	default:
		out = append(out, EndRun{})
		if !r.Online {
			out = append(out, HoldOutcome{}, Outcome{End: r.End, Sent: "held until reconciled"})
			break
		}
		out = append(out, send(it, r, now)...)
	}
	out = append(out, ReleaseOffline{})
	if r.End == LeaseLost && it.Pending == 0 && !it.Sending {
		out = append(out, Forget{})
		if !r.Draining {
			out = append(out, Sync{})
		}
	}
	return it, out
}

// reconciled sends an outcome held while offline, unless its lease ended
// by the worker's clock meanwhile: then it is late like any other.
func reconciled(it Item, in Reconciled, now time.Time) (Item, []Effect) {
	r := in.Run
	if in.Expires.After(it.Expires) {
		it.Expires = in.Expires
	}
	if it.Lost || it.LeaseOver(true, now) {
		out := []Effect{Late{}, Outcome{End: LeaseLost}}
		if it.Pending == 0 && !it.Sending {
			out = append(out, Forget{})
			if !r.Draining {
				out = append(out, Sync{})
			}
		}
		return it, out
	}
	return it, send(it, r, now)
}

// send is the command a run's end calls for: work.submit with the
// handler's artifacts and evidence, work.block (the engine adds the
// checkpoint), work.fail with the handler's reason and evidence, or the
// worker's own failure record.
func send(it Item, r RunEnded, now time.Time) []Effect {
	switch r.End {
	case Completed:
		return []Effect{Send{Type: protocol.CmdWorkSubmit, Payload: Submission(it, r)},
			Outcome{End: Completed, Sent: string(protocol.CmdWorkSubmit)}}
	case Blocked:
		return []Effect{Block{}}
	case Failed:
		ev := protocol.List[protocol.Evidence](r.Evidence)
		if len(ev) == 0 {
			ev = FailureEvidence(it.ID, r.AgentID, now)
		}
		reason := r.Reason
		if reason == "" {
			reason = "failed"
		}
		return []Effect{Send{Type: protocol.CmdWorkFail, Payload: &protocol.FailWorkPayload{WorkItemID: it.ID, Reason: reason, Evidence: ev,
			OwnershipEpoch: protocol.Uint64(it.Epoch), LeaseID: it.LeaseID}},
			Outcome{End: Failed, Sent: string(protocol.CmdWorkFail)}}
	}
	return nil
}

// Submission is the work.submit of a completed run: the handler's
// artifacts and evidence as it returned them, under the run's lease.
func Submission(it Item, r RunEnded) *protocol.SubmitWorkPayload {
	ev := protocol.List[protocol.Evidence](r.Evidence)
	if ev == nil {
		ev = protocol.List[protocol.Evidence]{}
	}
	return &protocol.SubmitWorkPayload{WorkItemID: it.ID, OwnershipEpoch: it.Epoch, LeaseID: it.LeaseID,
		Artifacts: append(protocol.List[string]{}, r.Artifacts...), Evidence: ev, Progress: r.Progress}
}
