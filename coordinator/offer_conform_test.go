package coordinator

import (
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// An exclusive WorkItem is offered to one worker at a time, best ranked
// first (spec 10.3): reliability in this log (results accepted minus
// failures and lapses), then the earliest availability the worker
// disclosed, then agent id. Each later offer of the same round goes to the
// next worker in that order; once all were offered the round starts again
// at the best. An urgent item goes to the best-ranked candidate set.
func TestExclusiveOffersFollowTheRanking(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	// Given out of rank order, so that an unsorted list shows.
	type rec struct {
		accepted, failed, lapsed uint64
		startIn                  time.Duration // disclosed start, from now
	}
	agents := map[string]rec{
		"w-low":    {accepted: 1},
		"w-zz":     {accepted: 2},
		"w-fail":   {accepted: 5, failed: 1, lapsed: 1},
		"w-a-late": {accepted: 5, startIn: 10 * time.Minute},
		"w-aa":     {accepted: 2},
		"w-best":   {accepted: 5},
	}
	want := []string{"w-best", "w-a-late", "w-fail", "w-aa", "w-zz", "w-low"}
	order := []string{"w-low", "w-zz", "w-fail", "w-a-late", "w-aa", "w-best"}

	setup := func(urgency protocol.Urgency) (*view, []Worker, *group.WorkItem) {
		v := stateView(t, p, protocol.WorkOpen)
		var workers []Worker
		for _, id := range order {
			r := agents[id]
			workers = append(workers, Worker{AgentID: id, Capabilities: capsOf(p)})
			v.members[agentActor(id)] = protocol.Membership{Principal: agentActor(id), State: protocol.MembershipActive, MembershipEpoch: 1, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}
			a := v.agent(id)
			a.accepted, a.failed, a.lapsed = r.accepted, r.failed, r.lapsed
			if r.startIn > 0 {
				a.disclosure = &protocol.ScheduleDisclosure{EstimatedStartWindow: protocol.TimeWindow{
					From: protocol.NewTime(t0.Add(r.startIn)), To: protocol.NewTime(t0.Add(r.startIn + time.Minute))}}
			}
		}
		w := v.g.Items[p.Stages[0].WorkItemID]
		w.Contract.Urgency = urgency
		return v, workers, w
	}
	pol := policy{me: "c1", leaseDuration: 10 * time.Minute, offerTTL: time.Minute, maxCandidates: 3, prechecked: map[string]uint64{}}

	v, workers, w := setup(protocol.UrgencyNormal)
	var got []string
	for range len(want) + 1 {
		pl := offerPayload(v, p, w, workers, t0, pol)
		if len(pl.Candidates) != 1 {
			t.Fatalf("an exclusive offer to %d candidates, want 1", len(pl.Candidates))
		}
		if !slices.Contains(pl.Candidates[0].SelectionBasis.PolicyRulesApplied, ruleSequential) {
			t.Fatalf("rules %v, want %s", pl.Candidates[0].SelectionBasis.PolicyRulesApplied, ruleSequential)
		}
		got = append(got, pl.Candidates[0].AgentID)
		// The offer lapses unaccepted; the view folds the offer made.
		v.applyWork(&protocol.Event{}, w, &group.OfferCreated{WorkRef: group.WorkRef{WorkItemID: w.WorkItemID}, OfferID: pl.OfferID, Candidates: pl.Candidates})
	}
	if wantAll := append(slices.Clone(want), want[0]); !slices.Equal(got, wantAll) {
		t.Fatalf("exclusive offers went to %v, want one at a time in rank order %v", got, wantAll)
	}

	v, workers, w = setup(protocol.UrgencyCritical)
	pl := offerPayload(v, p, w, workers, t0, pol)
	var set []string
	for _, c := range pl.Candidates {
		set = append(set, c.AgentID)
	}
	if !slices.Equal(set, want[:3]) {
		t.Fatalf("urgent offer to %v, want the three best ranked %v", set, want[:3])
	}
}
