package runtime

import (
	"context"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

// A worker started without any Group learns the Groups it is a member of
// from the authority (docs/wire.md: the HELLO answer, then a GROUPS frame
// on every change), subscribes them without a restart and wins an offer
// in a Group created after it connected.
func TestWorkerLearnsNewGroups(t *testing.T) {
	k := newWKit(t)
	// Enrolled by a first run, made a member of grp-a while stopped: the
	// HELLO answer of the next run names it.
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	if err := k.start(cfg).stop(t); err != nil {
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("wi-1 accepted through the HELLO's Groups", func() bool { return owner(k, "grp-a", "wi-1") == "w1" }, tw)

	// grp-b and its Mission are created while the worker is connected.
	do := func(p *authoritylite.Principal, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(context.Background(), typ, "grp-b", payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Second", Objective: "later", PriorityClass: protocol.PriorityNormal})
	do(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-b", AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})
	do(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	now := k.ac.Now()
	c := contractFor("wi-b1", protocol.UrgencyNormal, now)
	do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-b1", MissionID: "mis-b", Contract: c})
	do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-b1", OfferID: "off-b1", Contract: c, ExpiresAt: protocol.NewTime(now.Add(time.Hour)),
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"capability-match"}}}}})
	k.until("wi-b1 accepted in the new Group", func() bool { return owner(k, "grp-b", "wi-b1") == "w1" }, tw)
	if st := tw.w.Status(); st.SessionEpoch != 2 {
		t.Fatalf("session %d: the worker reconnected or restarted", st.SessionEpoch)
	}
}

// owner is the WorkItem's owner on the authority, "" when none.
func owner(k *wkit, groupID, id string) string {
	w, ok := k.auth.Service.WorkItem(groupID, id)
	if !ok || w.Ownership == nil {
		return ""
	}
	return w.Ownership.OwnerAgentID
}
