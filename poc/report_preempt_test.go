package poc

import (
	"encoding/json"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

func checkpointed(t *testing.T, item string, sec float64, reason protocol.CheckpointReason, phase string) protocol.Event {
	t.Helper()
	p := group.Checkpointed{WorkRef: group.WorkRef{WorkItemID: item, State: protocol.WorkQueued}, LeaseID: "l",
		Checkpoint: &protocol.CheckpointRef{CheckpointID: "cp-" + item}, CheckpointReason: reason, Progress: &protocol.Progress{Phase: phase}}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.Event{Type: protocol.EvtWorkCheckpointed, Aggregate: &protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: item},
		OccurredAt: at(sec), Payload: raw}
}

// A preemption is told from request to the critical item's start, each
// time from its own record; a checkpoint with reason preempted that no
// scheduler request preceded (a shutdown) is not one.
func TestComputePreemptions(t *testing.T) {
	logs := map[string][]protocol.Event{"grp-a": {
		checkpointed(t, "soak", 3.9, protocol.CheckpointPreempted, "load step 1"),
		checkpointed(t, "other", 5, protocol.CheckpointPreempted, "load step 2"), // shutdown: not asked
	}}
	obs := []Observation{{Worker: "w", Preemptions: []Preemption{
		{GroupID: "grp-a", WorkItemID: "soak", For: "grp-a/hotfix", Reason: "scheduler", At: at(3.3).Time},
		{GroupID: "grp-a", WorkItemID: "other", For: "x", Reason: "shutdown", At: at(4.9).Time},
	}}, {Worker: "w", Preemptions: []Preemption{ // the same request, observed again
		{GroupID: "grp-a", WorkItemID: "soak", For: "grp-a/hotfix", Reason: "scheduler", At: at(3.3).Time},
	}}}
	slots := []SlotUsage{{Worker: "w", Slot: 0, Intervals: []Interval{
		iv("soak", "grp-a", 3, 3.95, OutcomePreempted), iv("hotfix", "grp-a", 4, 4.1, OutcomeSubmitted), iv("soak", "grp-a", 4.2, 5, OutcomeSubmitted)}}}
	got := ComputePreemptions(logs, obs, slots, map[string]string{"grp-a/soak": "soak 1"})
	if len(got) != 1 {
		t.Fatalf("preemptions %+v", got)
	}
	p := got[0]
	if p.Victim != "soak" || p.Stage != "soak 1" || p.For != "hotfix" || p.Phase != "load step 1" ||
		!p.RunStartedAt.Equal(at(3).Time) || !p.RequestedAt.Equal(at(3.3).Time) || !p.SafePointAt.Equal(at(3.9).Time) ||
		p.SlotFreedAt == nil || !p.SlotFreedAt.Equal(at(3.95).Time) || p.ForStartedAt == nil || !p.ForStartedAt.Equal(at(4).Time) ||
		p.BusyMs != 300 || p.ToSafePointMs != 600 {
		t.Errorf("preemption %+v", p)
	}
}
