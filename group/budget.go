package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Budgets (spec 10.2, 20): a usage record charges a WorkItem's contract
// budget, its Mission's and every ancestor Mission's; an overflow in any
// refuses the command with nothing recorded (BUDGET_EXCEEDED). What each
// Mission's subtree has used is the authority's to add up across Groups;
// the limits are read here.

// CheckUsageRecord holds ext.missionweaveprotocol.core.resource_usage_record
// to a WorkItem of the Group, under the sender's current lease, with a
// non-zero delta. It returns the WorkItem.
func CheckUsageRecord(g *Group, in Input, now time.Time) (*WorkItem, error) {
	pl, err := payloadAs[protocol.RecordResourceUsagePayload](in)
	if err != nil {
		return nil, err
	}
	w := g.Items[pl.WorkItemID]
	if w == nil {
		return nil, protocol.InvalidCommand("work item %s not found", pl.WorkItemID).At("/payload/workItemId")
	}
	if err := w.CheckLease(in.Actor.ID, in.SessionEpoch, pl.OwnershipEpoch, pl.LeaseID, now); err != nil {
		return nil, err
	}
	if pl.UsageDelta.IsZero() {
		return nil, protocol.InvalidCommand("a usage record needs a non-zero delta").At("/payload/usageDelta")
	}
	return w, nil
}

// CheckItemBudget refuses a WorkItem's usage total used beyond its
// contract's budgets.
func CheckItemBudget(w *WorkItem, used protocol.Usage) error {
	if dim := w.Contract.Budgets.Exceeded(used); dim != "" {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeBudgetExceeded, "work item %s would exceed its %s budget", w.WorkItemID, dim), "dimension", dim, "scope", "workItem")
	}
	return nil
}

// CheckMissionBudget refuses a Mission's subtree usage total beyond its
// budgets; ancestor says the Mission is an ancestor of the charged Group's.
func CheckMissionBudget(m *protocol.Mission, subtree protocol.Usage, ancestor bool) error {
	if m == nil || m.Budgets == nil {
		return nil
	}
	dim := m.Budgets.Exceeded(subtree)
	switch {
	case dim == "":
		return nil
	case ancestor:
		return protocol.WithDetails(protocol.Errorf(protocol.CodeBudgetExceeded, "ancestor mission %s would exceed its %s budget", m.MissionID, dim), "dimension", dim, "scope", "ancestorMission", "missionId", m.MissionID)
	}
	return protocol.WithDetails(protocol.Errorf(protocol.CodeBudgetExceeded, "mission %s would exceed its %s budget", m.MissionID, dim), "dimension", dim, "scope", "mission")
}

// UsageDraft is the usage event of a charge that fits: delta on w by actor
// under its ownership epoch and lease, used its new total. historical is
// the session the usage happened under, reconciling the one reporting it.
func UsageDraft(w *WorkItem, actor protocol.Actor, epoch uint64, leaseID string, delta, used protocol.Usage, historical, reconciling uint64) EventDraft {
	return EventDraft{Type: protocol.EvtResourceUsageRecorded, Aggregate: protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: w.WorkItemID}, Revision: w.Revision + 1, Actor: actor, Payload: &UsageRecorded{
		WorkRef: WorkRef{WorkItemID: w.WorkItemID, State: w.State}, OwnershipEpoch: epoch, LeaseID: leaseID, UsageDelta: delta, UsedTotal: used,
		HistoricalSessionEpoch: historical, ReconcilingSessionEpoch: reconciling,
	}}
}
