package authoritylite

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// resource_usage_record is charged only under the item's current
// execution lease (spec 11.5): another lease id, an ownership epoch of no
// owner is refused at its pointer and
// nothing is recorded.
func TestUsageRecordNeedsTheCurrentLease(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	epoch, lease := w.Ownership.OwnershipEpoch, w.Lease.LeaseID
	for _, tc := range []struct {
		name  string
		epoch uint64
		lease string
		code  protocol.Code
	}{
		{"another lease", epoch, "lease-other", protocol.CodeWorkLeaseExpired},
		{"an ownership epoch never granted", epoch + 1, lease, protocol.CodeInvalidCommand},
	} {
		last := k.s.LastSequence("grp-a")
		_, err := k.do(k.w["w1"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: "wi-1",
			OwnershipEpoch: tc.epoch, LeaseID: tc.lease, UsageDelta: protocol.Usage{Tokens: 10}})
		if protocol.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.code)
		}
		if k.s.LastSequence("grp-a") != last || k.s.Usage("grp-a", "wi-1").Tokens != 0 {
			t.Fatalf("%s: the refused record was charged", tc.name)
		}
	}
	k.ok(k.w["w1"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: "wi-1",
		OwnershipEpoch: epoch, LeaseID: lease, UsageDelta: protocol.Usage{Tokens: 10}})
}

// A charge is judged against the Mission's own budget too, not only the
// item's (spec 11.5): two items each within their contract's budget whose
// sum passes the Mission's is BUDGET_EXCEEDED, scope mission, with nothing
// recorded; at exactly the Mission's budget it is accepted.
func TestUsageRecordWithinTheMissionBudget(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	const g = "grp-m"
	do := func(p *Principal, typ protocol.CommandType, payload any) error {
		_, err := p.Do(ctx, typ, g, payload)
		return err
	}
	must := func(p *Principal, typ protocol.CommandType, payload any) {
		t.Helper()
		if err := do(p, typ, payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	must(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-m", Title: "t", Objective: "o",
		PriorityClass: protocol.PriorityNormal, Budgets: &protocol.Budgets{Tokens: protocol.Uint64(1500)}})
	must(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-m", AgentID: "coord", LeaseDurationMs: 36000000})
	must(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w1"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	leases := map[string][2]any{}
	for _, id := range []string{"wi-a", "wi-b"} {
		c := testContract(id)
		c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
		c.Budgets = protocol.Budgets{Tokens: protocol.Uint64(1000)}
		c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
		must(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-m", Contract: c})
		must(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
			Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
		must(k.w["w1"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
		w, _ := k.s.WorkItem(g, id)
		must(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: w.Ownership.OwnershipEpoch})
		w, _ = k.s.WorkItem(g, id)
		leases[id] = [2]any{w.Ownership.OwnershipEpoch, w.Lease.LeaseID}
	}
	rec := func(id string, tokens uint64) error {
		return do(k.w["w1"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: id,
			OwnershipEpoch: leases[id][0].(uint64), LeaseID: leases[id][1].(string), UsageDelta: protocol.Usage{Tokens: tokens}})
	}
	if err := rec("wi-a", 800); err != nil {
		t.Fatal(err)
	}
	last := k.s.LastSequence(g)
	err := rec("wi-b", 800) // within wi-b's 1000, past the Mission's 1500
	if pe := asError(t, err); pe.Code != protocol.CodeBudgetExceeded || pe.Details["scope"] != "mission" {
		t.Fatalf("past the Mission's budget: %+v, want BUDGET_EXCEEDED scope mission", pe)
	}
	if k.s.LastSequence(g) != last || k.s.Usage(g, "wi-b").Tokens != 0 {
		t.Fatal("a refused charge left a trace")
	}
	if err := rec("wi-b", 700); err != nil {
		t.Fatalf("exactly at the Mission's budget: %v", err)
	}
}

// A client's ACKed cursor only moves forward: an older ACK (a late frame,
// a second connection of the peer behind the first) leaves it where it is.
func TestAckedCursorNeverMovesBack(t *testing.T) {
	k := newSvc(t)
	for _, seq := range []uint64{5, 3, 5, 9, 1} {
		k.s.Acked("w1", "grp-a", seq)
	}
	k.s.Acked("w2", "grp-a", 2)
	got := k.s.AckedCursors()
	if got[[2]string{"w1", "grp-a"}] != 9 || got[[2]string{"w2", "grp-a"}] != 2 {
		t.Fatalf("ACKed cursors %v, want w1 at 9 and w2 at 2", got)
	}
}
