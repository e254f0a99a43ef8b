package authoritylite

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Spec 15.3: first acceptance and approval are compare-and-set even when
// the commands race, now that a command is decided before the earlier
// ones commit. Three candidates accept each offer at once: exactly one
// wins each item, the others get WORK_ALREADY_OWNED, and the log holds one
// work.offer.accepted per item. The MissionOwner approves and requests
// changes at once: exactly one applies.
func TestConcurrentCompareAndSet(t *testing.T) {
	k := newSvc(t)
	k.w["w3"] = k.join("w3")
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	ids := []string{"w1", "w2", "w3"}
	const items = 12
	for i := range items {
		id := "wi-c" + string(rune('a'+i))
		c := testContract(id)
		c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
		c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
		k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
		cs := protocol.List[protocol.OfferCandidate]{}
		for _, a := range ids {
			cs = append(cs, protocol.OfferCandidate{AgentID: a, SelectionBasis: basis(k.clk.Now())})
		}
		k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c, Candidates: cs, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))})

		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, a := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[j] = k.do(k.w[a], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
			}()
		}
		close(start)
		wg.Wait()
		winner := ""
		for j, err := range errs {
			switch {
			case err == nil && winner != "":
				t.Fatalf("%s: both %s and %s won the first acceptance", id, winner, ids[j])
			case err == nil:
				winner = ids[j]
			case protocol.CodeOf(err) != protocol.CodeWorkAlreadyOwned:
				t.Fatalf("%s: the losing acceptance of %s got %v, want WORK_ALREADY_OWNED", id, ids[j], err)
			}
		}
		if w := k.item(id); winner == "" || w.Ownership == nil || w.Ownership.OwnerAgentID != winner || w.Ownership.OwnershipEpoch != 1 {
			t.Fatalf("%s: winner %q, authority says %+v", id, winner, w.Ownership)
		}
	}
	accepted := map[string]int{}
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type == protocol.EvtWorkOfferAccepted {
			accepted[ev.Aggregate.ID]++
		}
	}
	for id, n := range accepted {
		if n != 1 {
			t.Fatalf("%s accepted %d times in the log", id, n)
		}
	}
	if len(accepted) != items {
		t.Fatalf("%d items accepted in the log, want %d", len(accepted), items)
	}

	// Approval: approve and request changes race; one applies.
	for i := range items {
		id := "wi-c" + string(rune('a'+i))
		k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: id, Reason: "not needed"})
	}
	k.ok(k.coord, protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{MissionID: "mis-a", Summary: "done", Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{evidence("mis-a", "ac-1")}})
	var wg sync.WaitGroup
	var approveErr, changesErr error
	start := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-start
		_, approveErr = k.do(k.alice, protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: "mis-a", ApprovalID: "apr-1"})
	}()
	go func() {
		defer wg.Done()
		<-start
		_, changesErr = k.do(k.alice, protocol.CmdMissionRequestChanges, &protocol.RequestChangesPayload{MissionID: "mis-a", Changes: protocol.List[string]{"not yet"}})
	}()
	close(start)
	wg.Wait()
	if (approveErr == nil) == (changesErr == nil) {
		t.Fatalf("approve: %v; request changes: %v; want exactly one applied", approveErr, changesErr)
	}
	m, _ := k.s.Mission("grp-a")
	if (approveErr == nil && m.State != protocol.MissionApproved) || (changesErr == nil && m.State != protocol.MissionActive) {
		t.Fatalf("mission %s after approve %v / request changes %v", m.State, approveErr, changesErr)
	}
}

// race runs each command at once and returns their errors in order.
func race(cmds ...func() error) []error {
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, do := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = do()
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWins checks that exactly one of errs is nil and every other is
// REVISION_CONFLICT; it returns the winner's index.
func oneWins(t *testing.T, what string, errs []error) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("%s: commands %d and %d both applied", what, won, i)
		case err == nil:
			won = i
		case protocol.CodeOf(err) != protocol.CodeRevisionConflict:
			t.Fatalf("%s: command %d got %v, want REVISION_CONFLICT", what, i, err)
		}
	}
	if won < 0 {
		t.Fatalf("%s: none applied: %v", what, errs)
	}
	return won
}

// Spec 15.3: lease renewal and membership change are compare-and-set
// under concurrent commands too. Renewals of one lease and the
// coordinator's cancel, all expecting the item's current revision, race:
// one applies, the others are REVISION_CONFLICT, and the lease holds at
// most one renewal. Two membership changes and an end of the same
// membership race the same way.
func TestConcurrentRenewalAndMembershipCAS(t *testing.T) {
	k := newSvc(t)
	for round := range 6 {
		id := fmt.Sprintf("wi-r%d", round)
		w := k.toActive(id)
		rev := w.Revision
		expect := func(e *protocol.Envelope) { e.ExpectedRevision = &rev }
		renew := func() error {
			_, err := k.do(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: id, OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())}, expect)
			return err
		}
		cancel := func() error {
			_, err := k.do(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: id, Reason: "raced"}, expect)
			return err
		}
		won := oneWins(t, id, race(renew, renew, cancel, renew))
		got := k.item(id)
		switch {
		case got.Revision != rev+1:
			t.Fatalf("%s at revision %d after the race from %d, want one change", id, got.Revision, rev)
		case won == 2 && got.State != protocol.WorkCancelled:
			t.Fatalf("%s: the cancel won but the item is %s", id, got.State)
		case won != 2 && (got.State != protocol.WorkActive || got.Lease == nil || len(got.Lease.Renewals) != 1):
			t.Fatalf("%s: a renewal won but the item is %s with lease %+v", id, got.State, got.Lease)
		}
	}

	k.w["w3"] = k.join("w3")
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	for round := range 6 {
		m, _ := k.s.Membership("grp-a", agent("w3"))
		if m.State != protocol.MembershipActive {
			// The end won the last round: join again.
			k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
			m, _ = k.s.Membership("grp-a", agent("w3"))
		}
		rev := m.Revision
		expect := func(e *protocol.Envelope) { e.ExpectedRevision = &rev }
		change := func(by *Principal, roles ...protocol.Role) func() error {
			return func() error {
				_, err := k.do(by, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: roles}, expect)
				return err
			}
		}
		end := func() error {
			_, err := k.do(k.coord, protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: agent("w3"), Reason: "raced"}, expect)
			return err
		}
		what := fmt.Sprintf("membership round %d", round)
		won := oneWins(t, what, race(change(k.coord, protocol.RoleWorker, protocol.RoleCoordinator), change(k.alice, protocol.RoleWorker), end))
		if got, _ := k.s.Membership("grp-a", agent("w3")); got.Revision != rev+1 || (won == 2) != (got.State == protocol.MembershipEnded) {
			t.Fatalf("%s: command %d won, membership %+v (was revision %d)", what, won, got, rev)
		}
	}
	// A change expecting an old revision is refused before it applies.
	stale := uint64(1)
	k.refuse(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}, protocol.CodeRevisionConflict, func(e *protocol.Envelope) { e.ExpectedRevision = &stale })
}
