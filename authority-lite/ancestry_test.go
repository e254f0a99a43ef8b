package authoritylite

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestBudgetUpTheAncestry charges work in a child Mission's Group against
// the parent Mission's budget: an overflow anywhere up the ancestry
// refuses the charge with nothing recorded in either Group.
func TestBudgetUpTheAncestry(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	// A parent Mission with a token budget, its WorkItem linked to a child.
	k.ok(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-p", Title: "parent", Objective: "o", PriorityClass: protocol.PriorityNormal,
		Budgets: &protocol.Budgets{Tokens: protocol.Uint64(1000)}}, func(e *protocol.Envelope) { e.GroupID = "grp-p" })
	do := func(p *Principal, group string, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(ctx, typ, group, payload); err != nil {
			t.Fatalf("%s in %s: %v", typ, group, err)
		}
	}
	do(k.alice, "grp-p", protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-p", AgentID: "coord", LeaseDurationMs: 36000000})
	c := testContract("wi-p")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	c.Budgets = protocol.Budgets{Tokens: protocol.Uint64(5000)}
	do(k.coord, "grp-p", protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-p", MissionID: "mis-p", Contract: c})
	do(k.coord, "grp-p", protocol.CmdMissionCreateChild, &protocol.CreateChildMissionPayload{MissionID: "mis-p", ParentWorkItemID: "wi-p",
		ChildMissionID: "mis-c", ChildGroupID: "grp-c", Title: "child", Objective: "o", OnChildFailure: protocol.ChildFailureFail})
	if _, ok := k.s.Mission("grp-c"); !ok {
		t.Fatal("child Mission not created")
	}
	// Work in the child Group.
	do(k.alice, "grp-c", protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-c", AgentID: "coord", LeaseDurationMs: 36000000})
	do(k.coord, "grp-c", protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w1"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	cc := testContract("wi-c")
	cc.RetryPolicy.AttemptTimeoutMs, cc.RetryPolicy.CostLimit = 600000, 5
	cc.Budgets = protocol.Budgets{Tokens: protocol.Uint64(5000)}
	cc.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
	do(k.coord, "grp-c", protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-c", MissionID: "mis-c", Contract: cc})
	do(k.coord, "grp-c", protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-c", OfferID: "off-c", Contract: cc,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
	do(k.w["w1"], "grp-c", protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-c", OfferID: "off-c", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
	w, _ := k.s.WorkItem("grp-c", "wi-c")
	do(k.w["w1"], "grp-c", protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-c", OwnershipEpoch: w.Ownership.OwnershipEpoch})
	w, _ = k.s.WorkItem("grp-c", "wi-c")
	charge := func(tokens uint64) error {
		_, err := k.w["w1"].Do(ctx, protocol.CmdResourceUsageRecord, "grp-c", &protocol.RecordResourceUsagePayload{WorkItemID: "wi-c", OwnershipEpoch: w.Lease.OwnershipEpoch, LeaseID: w.Lease.LeaseID, UsageDelta: protocol.Usage{Tokens: tokens}})
		return err
	}
	if err := charge(600); err != nil {
		t.Fatal(err)
	}
	lastC, lastP := k.s.LastSequence("grp-c"), k.s.LastSequence("grp-p")
	// A receipt comes after the commit: what was decided is durable.
	if d := k.s.DecidedSequence("grp-c"); d != lastC || d == 0 || k.s.DecidedSequence("no-such-group") != 0 {
		t.Fatalf("decided %d, durable %d", d, lastC)
	}
	err := charge(600) // fits the child's own budgets, not the parent's
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeBudgetExceeded || pe.Details["scope"] != "ancestorMission" {
		t.Fatalf("over the parent's budget: %v", err)
	}
	if k.s.LastSequence("grp-c") != lastC || k.s.LastSequence("grp-p") != lastP || k.s.Usage("grp-c", "wi-c").Tokens != 600 {
		t.Fatal("a refused charge left a trace")
	}
	// The parent's view of its subtree survives a reopen.
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	k.w["w1"].s = k.s
	if err := charge(600); protocol.CodeOf(err) != protocol.CodeBudgetExceeded {
		t.Fatalf("after reopen: %v", err)
	}
	if err := charge(400); err != nil {
		t.Fatalf("exactly at the parent's budget: %v", err)
	}
}
