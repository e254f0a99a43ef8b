package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// ApplyHistorical records a reconciled offline command whose lease is no
// longer current but which the caller checked against the historical lease
// and grace window (spec 11.5, offline.CheckBuffered). It never moves the
// WorkItem's state or grants anything: progress becomes a work.progressed
// fact, a checkpoint becomes the item's latest checkpoint (so a re-offer can
// resume from it). Any other type is refused.
func (g *Group) ApplyHistorical(in Input, historicalLeaseID string, now time.Time) (Outcome, error) {
	t := g.begin(in, now)
	var err error
	switch p := in.Payload.(type) {
	case *protocol.RenewLeasePayload:
		w := t.item(p.WorkItemID)
		if w == nil {
			return Outcome{}, protocol.InvalidCommand("work item %s not found", p.WorkItemID).At("/payload/workItemId")
		}
		prog := p.Progress
		t.emitWork(protocol.EvtWorkProgressed, w, &Progressed{LeaseID: historicalLeaseID, Progress: &prog, Reason: ReasonOfflineReconciled})
	case *protocol.CheckpointWorkPayload:
		w := t.item(p.WorkItemID)
		if w == nil {
			return Outcome{}, protocol.InvalidCommand("work item %s not found", p.WorkItemID).At("/payload/workItemId")
		}
		if err = checkpointFields(p.CheckpointID, p.StateDigest); err != nil {
			return Outcome{}, err
		}
		w.Checkpoint = &protocol.CheckpointRef{CheckpointID: p.CheckpointID, StateDigest: p.StateDigest, At: protocol.NewTime(now)}
		k, prog := *w.Checkpoint, p.Progress
		t.emitWork(protocol.EvtWorkCheckpointed, w, &Checkpointed{LeaseID: historicalLeaseID, Checkpoint: &k, CheckpointReason: p.Reason, Progress: &prog, Reason: ReasonOfflineReconciled})
	default:
		return Outcome{}, protocol.InvalidCommand("%s has no historical form", in.Type)
	}
	return t.apply()
}
