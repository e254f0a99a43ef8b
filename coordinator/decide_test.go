package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// stateView is a view of reviewedPlan's Mission, active under c1 with a
// fresh lease, w1 a member, and the stages' items in the given states.
func stateView(t testing.TB, p *plan.Plan, states ...protocol.WorkItemState) *view {
	v := newView(p.Mission.GroupID)
	v.g.Mission = &protocol.Mission{MissionID: p.Mission.ID, State: protocol.MissionActive, CreatedAt: protocol.NewTime(t0),
		Coordinator: &protocol.CoordinatorLease{AgentID: "c1", CoordinatorEpoch: 1, LeaseExpiresAt: protocol.NewTime(t0.Add(10 * time.Minute))}}
	for _, id := range []string{"c1", "w1"} {
		v.members[agentActor(id)] = protocol.Membership{Principal: agentActor(id), State: protocol.MembershipActive, MembershipEpoch: 1, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}
	}
	for i, st := range states {
		s := p.Stages[i]
		a, err := p.Authorize(s.ID, t0)
		if err != nil {
			t.Fatal(err)
		}
		v.g.Items[s.WorkItemID] = &group.WorkItem{WorkItem: protocol.WorkItem{WorkItemID: s.WorkItemID, State: st, Contract: a.Contract}}
	}
	return v
}

// currentContext records, as the Group's current package of item, the
// summary the view gives now.
func currentContext(v *view, p *plan.Plan, item string) {
	b := summarize(v, p, v.g.Items[item])
	if v.g.Contexts == nil {
		v.g.Contexts = map[string]*group.ContextHead{}
	}
	v.g.Contexts[contextID(item)] = &group.ContextHead{Digest: "sha256:00", Package: protocol.ContextPackage{PackageID: contextID(item), Version: 1,
		Artifacts: b.artifacts, Decisions: b.decisions, Constraints: b.constraints, OpenQuestions: b.questions}}
}

func kinds(acts []action) string {
	var out []string
	for _, a := range acts {
		k := string(a.kind)
		if a.item != "" {
			k += " " + a.item[strings.LastIndexByte(a.item, ':')+1:]
		}
		out = append(out, k)
	}
	return strings.Join(out, ", ")
}

func TestDecide(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	workers := []Worker{{AgentID: "w1", Capabilities: capsOf(p)}}
	draft, proof := p.Stages[0].WorkItemID, p.Stages[1].WorkItemID
	submitted := func(v *view, id string, seq uint64) {
		v.item(id).submission = &submission{seq: seq, agent: "w1"}
	}
	pol := policy{me: "c1", leaseDuration: 10 * time.Minute, offerTTL: time.Minute, maxCandidates: 3, prechecked: map[string]uint64{}}
	for _, tc := range []struct {
		name   string
		states []protocol.WorkItemState
		edit   func(v *view, pol *policy)
		now    time.Time
		want   string
	}{
		{name: "another coordinator's Mission", edit: func(v *view, _ *policy) { v.g.Mission.Coordinator.AgentID = "c2" }, want: ""},
		{name: "not active", edit: func(v *view, _ *policy) { v.g.Mission.State = protocol.MissionAwaitingApproval }, want: ""},
		{name: "authorizes in plan order, one at a time", want: "authorize draft"},
		{name: "renews past half-life, first", now: t0.Add(6 * time.Minute), want: "renew, authorize draft"},
		{name: "adds a candidate worker", edit: func(v *view, _ *policy) { delete(v.members, agentActor("w1")) }, want: "member w1, authorize draft"},
		{name: "offers an open item", states: []protocol.WorkItemState{protocol.WorkOpen}, want: "authorize proofread, context draft, offer draft"},
		{name: "no eligible worker, no offer", states: []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOpen},
			edit: func(v *view, _ *policy) {
				v.members[agentActor("w1")] = protocol.Membership{State: protocol.MembershipEnded}
			}, want: "member w1"},
		// The authority refuses a candidate without the worker role
		// (group.CheckCandidate): none is offered.
		{name: "a member without the worker role is no candidate", states: []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOpen},
			edit: func(v *view, _ *policy) {
				v.members[agentActor("w1")] = protocol.Membership{State: protocol.MembershipActive, Roles: protocol.List[protocol.Role]{protocol.RoleObserver}}
			}, want: ""},
		{name: "waits for a dependency", states: []protocol.WorkItemState{protocol.WorkActive, protocol.WorkOpen}, want: ""},
		{name: "a submitted dependency is enough for a reviewer", states: []protocol.WorkItemState{protocol.WorkSubmitted, protocol.WorkOpen},
			edit: func(v *view, pol *policy) { submitted(v, draft, 7); pol.prechecked[draft] = 7 }, want: "context proofread, offer proofread"},
		{name: "reviews a submission", states: []protocol.WorkItemState{protocol.WorkSubmitted, protocol.WorkOpen},
			edit: func(v *view, _ *policy) { submitted(v, draft, 7) }, want: "review draft, context proofread, offer proofread"},
		{name: "a prechecked submission waits for its reviewer's newer verdict", states: []protocol.WorkItemState{protocol.WorkSubmitted, protocol.WorkSubmitted},
			edit: func(v *view, pol *policy) { submitted(v, draft, 9); submitted(v, proof, 8); pol.prechecked[draft] = 9 }, want: "review proofread"},
		{name: "the verdict came: both reviewed, the reviewed first", states: []protocol.WorkItemState{protocol.WorkSubmitted, protocol.WorkSubmitted},
			edit: func(v *view, pol *policy) { submitted(v, draft, 7); submitted(v, proof, 9); pol.prechecked[draft] = 7 }, want: "review draft, review proofread"},
		{name: "an expired offer is made again", states: []protocol.WorkItemState{protocol.WorkOffered, protocol.WorkOpen}, now: t0.Add(2 * time.Minute),
			edit: func(v *view, _ *policy) {
				v.g.Items[draft].Offer = &protocol.Offer{ExpiresAt: protocol.NewTime(t0.Add(time.Minute))}
			}, want: "context draft, offer draft"},
		{name: "a standing offer is not", states: []protocol.WorkItemState{protocol.WorkOffered, protocol.WorkOpen},
			edit: func(v *view, _ *policy) {
				v.g.Items[draft].Offer = &protocol.Offer{ExpiresAt: protocol.NewTime(t0.Add(time.Minute))}
			}, want: ""},
		{name: "a lapsed owner is fenced by a new offer", states: []protocol.WorkItemState{protocol.WorkQueued, protocol.WorkOpen}, now: t0.Add(time.Minute),
			edit: func(v *view, _ *policy) {
				v.g.Items[draft].Ownership = &protocol.OwnershipGrant{OwnerAgentID: "w1", OwnershipEpoch: 1, StartDeadline: protocol.NewTime(t0)}
			}, want: "context draft, offer draft"},
		{name: "a failure with attempts left is retried", states: []protocol.WorkItemState{protocol.WorkFailed, protocol.WorkOpen},
			edit: func(v *view, _ *policy) { v.item(draft).failures = 1 }, want: "context draft, offer draft"},
		{name: "a package that still says it all is not published again", states: []protocol.WorkItemState{protocol.WorkFailed, protocol.WorkOpen},
			edit: func(v *view, _ *policy) { v.item(draft).failures = 1; currentContext(v, p, draft) }, want: "offer draft"},
		{name: "a package whose content changed is published again", states: []protocol.WorkItemState{protocol.WorkFailed, protocol.WorkOpen},
			edit: func(v *view, _ *policy) {
				v.item(draft).failures = 1
				currentContext(v, p, draft)
				v.g.Items[draft].Contract.AllowedTools = append(protocol.List[string]{"curl"}, v.g.Items[draft].Contract.AllowedTools...)
			}, want: "context draft, offer draft"},
		{name: "after its backoff", states: []protocol.WorkItemState{protocol.WorkFailed, protocol.WorkOpen}, now: t0.Add(time.Second),
			edit: func(v *view, _ *policy) {
				v.item(draft).failures, v.item(draft).failedAt = 2, t0
				v.g.Items[draft].Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 1000, MaxMs: 5000, Multiplier: 2}}
			}, want: ""},
		{name: "out of attempts: the Mission is terminated", states: []protocol.WorkItemState{protocol.WorkFailed, protocol.WorkOpen},
			edit: func(v *view, _ *policy) { v.item(draft).failures = 2 }, want: "terminate draft"},
		{name: "all verified: submitted for approval", states: []protocol.WorkItemState{protocol.WorkVerified, protocol.WorkVerified}, want: "submit-for-approval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := stateView(t, p, tc.states...)
			pl := pol
			pl.prechecked = map[string]uint64{}
			if tc.edit != nil {
				tc.edit(v, &pl)
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			if got := kinds(decide(v, p, workers, now, pl)); got != tc.want {
				t.Fatalf("decide = %q, want %q", got, tc.want)
			}
		})
	}
}

// For any state of the items, memberships and time, decide names each
// action once (its action id derives from the log position and the
// action, so a repeat would be two commands under one id) and an offer
// goes only to eligible workers: active members whose card matches, at
// most one for an exclusive item and MaxCandidates for an urgent one.
func TestDecideProperties(t *testing.T) {
	p := mustPlan(t, "../examples/plans/bugfix.yaml")
	states := []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive,
		protocol.WorkSubmitted, protocol.WorkVerified, protocol.WorkFailed}
	rapid.Check(t, func(rt *rapid.T) {
		var st []protocol.WorkItemState
		for range rapid.IntRange(0, len(p.Stages)).Draw(rt, "items") {
			st = append(st, rapid.SampledFrom(states).Draw(rt, "state"))
		}
		v := stateView(t, p, st...)
		var workers []Worker
		all := capsOf(p)
		for i := range rapid.IntRange(1, 5).Draw(rt, "workers") {
			id := fmt.Sprintf("w%d", i+1)
			var caps []protocol.Capability
			for _, c := range all {
				if rapid.Bool().Draw(rt, "has") {
					if rapid.Bool().Draw(rt, "old") {
						c.Version = "0.9.0"
					}
					caps = append(caps, c)
				}
			}
			workers = append(workers, Worker{AgentID: id, Capabilities: caps})
			if rapid.Bool().Draw(rt, "member") {
				v.members[agentActor(id)] = protocol.Membership{State: protocol.MembershipActive, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}
			}
		}
		now := t0.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "secs")) * time.Second)
		for id, w := range v.g.Items {
			l := v.item(id)
			l.failures = rapid.IntRange(0, 3).Draw(rt, "failures")
			if rapid.Bool().Draw(rt, "urgent") {
				w.Contract.Urgency = protocol.UrgencyCritical
			}
			switch w.State {
			case protocol.WorkOffered:
				w.Offer = &protocol.Offer{ExpiresAt: protocol.NewTime(t0.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "exp")) * time.Second))}
			case protocol.WorkQueued, protocol.WorkActive:
				owner := rapid.SampledFrom(workers).Draw(rt, "owner").AgentID
				w.Ownership = &protocol.OwnershipGrant{OwnerAgentID: owner, OwnershipEpoch: 1, StartDeadline: protocol.NewTime(t0.Add(5 * time.Minute))}
			case protocol.WorkSubmitted:
				l.submission = &submission{seq: uint64(rapid.IntRange(1, 50).Draw(rt, "seq")), agent: "w1"}
			}
		}
		pol := policy{me: "c1", leaseDuration: 10 * time.Minute, offerTTL: time.Minute, maxCandidates: rapid.IntRange(1, 4).Draw(rt, "max"), prechecked: map[string]uint64{}}
		acts := decide(v, p, workers, now, pol)
		seen := map[string]bool{}
		for _, a := range acts {
			if seen[a.key()] {
				rt.Fatalf("%s decided twice: %s", a.key(), kinds(acts))
			}
			seen[a.key()] = true
			if a.kind != actOffer {
				continue
			}
			w := v.g.Items[a.item]
			o := offerPayload(v, p, w, workers, now, pol)
			limit := 1
			if urgent(w.Contract) {
				limit = pol.maxCandidates
			}
			if len(o.Candidates) == 0 || len(o.Candidates) > limit {
				rt.Fatalf("%s offered to %d candidates, limit %d", a.item, len(o.Candidates), limit)
			}
			for _, c := range o.Candidates {
				i := slices.IndexFunc(workers, func(wk Worker) bool { return wk.AgentID == c.AgentID })
				if i < 0 || !v.isMember(c.AgentID) || !satisfies(workers[i], w.Contract) {
					rt.Fatalf("%s offered to ineligible %s", a.item, c.AgentID)
				}
			}
		}
	})
}

// satisfies is the eligibility rule written plainly, to check
// capabilityMatch against.
func satisfies(wk Worker, c protocol.WorkContract) bool {
	for _, req := range c.RequiredCapabilities {
		ok := false
		for _, have := range wk.Capabilities {
			ok = ok || have.ID == req.ID && protocol.VersionSatisfies(have.Version, req.Version)
		}
		if !ok {
			return false
		}
	}
	return true
}
