package authoritylite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// childKit is svc with a parent WorkItem wi-p in grp-a waiting for child
// Mission mis-c in grp-c.
type childKit struct {
	*svc
}

func newChildKit(t *testing.T, onFailure protocol.ChildFailurePolicy, hold bool) *childKit {
	k := &childKit{newSvc(t)}
	c := testContract("wi-p")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-p", MissionID: "mis-a", Contract: c})
	k.s.holdFollowUps = hold
	k.ok(k.coord, protocol.CmdMissionCreateChild, &protocol.CreateChildMissionPayload{MissionID: "mis-a", ParentWorkItemID: "wi-p",
		ChildMissionID: "mis-c", ChildGroupID: "grp-c", Title: "child", Objective: "o", OnChildFailure: onFailure})
	return k
}

// crash copies the store as a SIGKILL would leave it now (every commit
// so far is durable; nothing of Close runs) and opens the copy.
func (k *childKit) crash() {
	k.t.Helper()
	dir := k.t.TempDir()
	raw, err := os.ReadFile(filepath.Join(k.dir, "authority.db"))
	if err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authority.db"), raw, 0o600); err != nil {
		k.t.Fatal(err)
	}
	k.reopen(dir)
}

func (k *childKit) reopen(dir string) {
	k.t.Helper()
	if dir == k.dir {
		k.s.Close()
	} else {
		defer k.s.Close() // a crashed process holds nothing: close it after
	}
	k.dir, k.s = dir, openSvc(k.t, dir, k.clk, k.akey)
	for _, p := range append([]*Principal{k.alice, k.coord}, k.w["w1"], k.w["w2"]) {
		p.s = k.s
	}
}

func (k *childKit) pendingFollowUps() int {
	n := 0
	_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketFollowUps).Stats().KeyN
		return nil
	})
	return n
}

func (k *childKit) countEvents(groupID string, typ protocol.EventType) int {
	evs, err := k.s.Events(groupID, 0, 0)
	if err != nil {
		k.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// A crash right after mission.create_child committed the parent's side:
// the next open creates the child's Group, once; the parent is never left
// blocked on a Group that does not exist.
func TestChildGroupCreatedAfterCrash(t *testing.T) {
	k := newChildKit(t, protocol.ChildFailureFail, true)
	if _, ok := k.s.Mission("grp-c"); ok {
		t.Fatal("the hold did not hold: the child exists before the crash")
	}
	if n := k.pendingFollowUps(); n != 1 {
		t.Fatalf("%d follow-ups pending, want the child's", n)
	}
	k.crash()
	m, ok := k.s.Mission("grp-c")
	if !ok || m.MissionID != "mis-c" || m.Parent == nil || m.Parent.WorkItemID != "wi-p" {
		t.Fatalf("child after the crash: %+v, %v", m, ok)
	}
	if n := k.pendingFollowUps(); n != 0 {
		t.Fatalf("%d follow-ups still pending after they were carried out", n)
	}
	created := k.countEvents("grp-c", protocol.EvtMissionCreated)
	k.reopen(k.dir)
	if n := k.countEvents("grp-c", protocol.EvtMissionCreated); n != 1 || created != 1 {
		t.Fatalf("mission.created in the child: %d, then %d after another open; want 1", created, n)
	}
	// The child works as any Mission: its owner can cancel it, and the
	// parent hears of it.
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-c", Reason: "not needed"}, inGroup("grp-c"))
	if w := k.item("wi-p"); w.State != protocol.WorkFailed {
		t.Fatalf("parent item %s after its child was cancelled, want failed", w.State)
	}
}

// A crash right after the child's terminal event: the next open delivers
// the outcome to the parent WorkItem, once.
func TestChildOutcomeDeliveredAfterCrash(t *testing.T) {
	k := newChildKit(t, protocol.ChildFailureFail, false)
	k.s.holdFollowUps = true
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-c", Reason: "not needed"}, inGroup("grp-c"))
	if w := k.item("wi-p"); w.State != protocol.WorkBlocked {
		t.Fatalf("parent item %s before the crash, want still blocked", w.State)
	}
	k.crash()
	if w := k.item("wi-p"); w.State != protocol.WorkFailed {
		t.Fatalf("parent item after the crash: %s, want failed", w.State)
	}
	k.reopen(k.dir)
	if n := k.countEvents("grp-a", protocol.EvtWorkFailed); n != 1 {
		t.Fatalf("%d work.failed in the parent, want 1", n)
	}
	if n := k.pendingFollowUps(); n != 0 {
		t.Fatalf("%d follow-ups pending", n)
	}
}

// The child's outcome reaches the parent WorkItem as its declared policy
// says (spec 10.2 rows 16-17): an approval verifies it with the approval
// as evidence; a failure fails it, or blocks it for the coordinator.
func TestChildOutcomeFollowsPolicy(t *testing.T) {
	approve := func(k *childKit) {
		k.ok(k.coord, protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{MissionID: "mis-c", Summary: "done",
			Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{{Subject: "mis-c", Criteria: protocol.List[string]{"ac-1"},
				Method: "review", Result: protocol.EvidencePass, Producer: k.coord.Actor, Timestamp: protocol.NewTime(k.clk.Now()), Artifacts: protocol.List[string]{}}}},
			inGroup("grp-c"))
		k.ok(k.alice, protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: "mis-c", ApprovalID: "apr-c"}, inGroup("grp-c"))
	}
	cancel := func(k *childKit) {
		k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-c", Reason: "not needed"}, inGroup("grp-c"))
	}
	for _, tc := range []struct {
		name      string
		onFailure protocol.ChildFailurePolicy
		end       func(*childKit)
		want      protocol.WorkItemState
	}{
		{"approved", protocol.ChildFailureFail, approve, protocol.WorkVerified},
		{"cancelled, fail", protocol.ChildFailureFail, cancel, protocol.WorkFailed},
		{"cancelled, block", protocol.ChildFailureBlock, cancel, protocol.WorkBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newChildKit(t, tc.onFailure, false)
			k.ok(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-c", AgentID: "coord",
				LeaseDurationMs: uint64((10 * time.Hour).Milliseconds())}, inGroup("grp-c"))
			tc.end(k)
			w := k.item("wi-p")
			if w.State != tc.want {
				t.Fatalf("parent item %s, want %s", w.State, tc.want)
			}
			switch tc.want {
			case protocol.WorkVerified:
				if w.ChildMissionID != "mis-c" || k.countEvents("grp-a", protocol.EvtWorkResultAccepted) != 1 {
					t.Fatalf("verified without the child's approval: %+v", w)
				}
			case protocol.WorkBlocked:
				if w.ChildMissionID != "" || w.Blocker == nil {
					t.Fatalf("blocked for the coordinator: %+v", w)
				}
			}
			if n := k.pendingFollowUps(); n != 0 {
				t.Fatalf("%d follow-ups pending", n)
			}
		})
	}
}

func inGroup(id string) func(*protocol.Envelope) {
	return func(e *protocol.Envelope) { e.GroupID = id }
}
