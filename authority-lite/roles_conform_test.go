package authoritylite

import (
	"strconv"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A work.offer goes only to candidates whose Group membership holds the
// worker role, whatever their Agent Card declares: an agent whose card
// says worker but who was made a member as observer (or coordinator only)
// is AUTH_FORBIDDEN at its pointer, with the member's roles in the
// details, and the refused offer changes nothing.
func TestOfferCandidateNeedsWorkerMembershipRole(t *testing.T) {
	k := newSvc(t)
	k.joinAs("card-worker", protocol.RoleWorker, protocol.RoleObserver)
	k.joinAs("card-both", protocol.RoleWorker, protocol.RoleCoordinator)
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("card-worker"), Roles: roles(protocol.RoleObserver)})
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("card-both"), Roles: roles(protocol.RoleCoordinator)})

	c := testContract("wi-m")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-m", MissionID: "mis-a", Contract: c})
	offer := func(id string, to ...string) error {
		cs := protocol.List[protocol.OfferCandidate]{}
		for _, a := range to {
			cs = append(cs, protocol.OfferCandidate{AgentID: a, SelectionBasis: basis(k.clk.Now())})
		}
		_, err := k.do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-m", OfferID: id, Contract: c,
			Candidates: cs, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
		return err
	}
	for i, tc := range []struct {
		to      []string
		ptr     string
		memRole string
	}{
		{[]string{"card-worker"}, "/payload/candidates/0/agentId", "observer"},
		{[]string{"w1", "card-both"}, "/payload/candidates/1/agentId", "coordinator"},
	} {
		err := offer("off-x"+strconv.Itoa(i), tc.to...)
		if err == nil {
			t.Fatalf("offer to %v accepted: a member without the worker role was offered work", tc.to)
		}
		pe := asError(t, err)
		if pe.Code != protocol.CodeAuthForbidden || pe.Pointer != tc.ptr || pe.Details["role"] != "worker" {
			t.Fatalf("offer to %v: %+v, want AUTH_FORBIDDEN at %s for the worker role", tc.to, pe, tc.ptr)
		}
		if got, _ := pe.Details["memberRoles"].([]string); len(got) != 1 || got[0] != tc.memRole {
			t.Fatalf("offer to %v: memberRoles %v, want [%s]", tc.to, pe.Details["memberRoles"], tc.memRole)
		}
		if st := k.item("wi-m").State; st != protocol.WorkOpen {
			t.Fatalf("a refused offer changed the item: %s", st)
		}
	}
	// A candidate that is no member, or whose membership ended (its record
	// stays, with the worker role it held), is MEMBERSHIP_REQUIRED at its
	// pointer: only active members are offered work.
	k.joinAs("card-gone", protocol.RoleWorker)
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("card-gone"), Roles: roles(protocol.RoleWorker)})
	k.ok(k.coord, protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: agent("card-gone"), Reason: "left"})
	k.joinAs("card-never", protocol.RoleWorker)
	for i, to := range [][]string{{"w1", "card-gone"}, {"card-never"}} {
		err := offer("off-m"+strconv.Itoa(i), to...)
		pe := asError(t, err)
		if ptr := "/payload/candidates/" + strconv.Itoa(len(to)-1) + "/agentId"; pe.Code != protocol.CodeMembershipRequired || pe.Pointer != ptr {
			t.Fatalf("offer to %v: %+v, want MEMBERSHIP_REQUIRED at %s", to, pe, ptr)
		}
		if st := k.item("wi-m").State; st != protocol.WorkOpen {
			t.Fatalf("a refused offer changed the item: %s", st)
		}
	}
	// The same agent, once given the worker role, may be offered work.
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("card-worker"), Roles: roles(protocol.RoleWorker)})
	if err := offer("off-ok", "card-worker"); err != nil {
		t.Fatalf("offer to a worker member: %v", err)
	}
}
