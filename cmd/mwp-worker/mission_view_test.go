package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/review"
)

// The status view over the routes: a WorkItem accepted by a worker shows
// its owner and the ETA of the worker's schedule disclosure, and the
// change from before is one appended line.
func TestMissionViewETA(t *testing.T) {
	ctx := context.Background()
	a, err := embed.Start(embed.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	key := func(kind protocol.ActorKind, id string) protocol.PrivateKey {
		k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	hk := key(protocol.ActorHuman, "alice")
	if err := a.Service.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := a.Service.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	principals := map[string]*authoritylite.Principal{}
	join := func(id string, role protocol.Role) {
		p := a.Service.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: id}, key(protocol.ActorAgent, id))
		if err := p.Join(ctx, protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id,
			Capabilities: protocol.List[protocol.Capability]{{ID: "demo.steps", Version: "1.0.0"}},
			Roles:        protocol.List[protocol.Role]{role}, MaxConcurrency: 1}); err != nil {
			t.Fatal(err)
		}
		principals[id] = p
	}
	join("coord", protocol.RoleCoordinator)
	join("w1", protocol.RoleWorker)
	do := func(who string, typ protocol.CommandType, payload any) {
		t.Helper()
		p := alice
		if who != "alice" {
			p = principals[who]
		}
		if _, err := p.Do(ctx, typ, "grp-v", payload); err != nil {
			t.Fatalf("%s by %s: %v", typ, who, err)
		}
	}
	now := time.Now()
	do("alice", protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-v", Title: "view", Objective: "o", PriorityClass: protocol.PriorityNormal})
	do("alice", protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-v", AgentID: "coord", LeaseDurationMs: 3600000})
	do("coord", protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	c := demoContract("wi-1", now)
	do("coord", protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-v", Contract: c})
	do("coord", protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-1", Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "demo.steps", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"test"}}}},
		ExpiresAt: protocol.NewTime(now.Add(10 * time.Minute))})

	url, pin := a.Endpoint()
	r, err := remote.Dial(ctx, remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: alice.Actor, Key: hk, AuthorityKeys: a.Keys()})
	if err != nil {
		t.Fatal(err)
	}
	v := review.NewView("grp-v")
	if err := loadView(ctx, v, r); err != nil {
		t.Fatal(err)
	}
	before := v.Status()
	if len(before.Stages) != 1 || before.Stages[0].State != protocol.WorkOffered || before.Stages[0].ETA != nil || before.Stages[0].Owner != "" {
		t.Fatalf("before acceptance: %+v", before)
	}
	if v.MembershipEpoch(alice.Actor) != 1 {
		t.Fatalf("alice's membership epoch %d, want 1", v.MembershipEpoch(alice.Actor))
	}
	eta := protocol.NewTime(now.Add(90 * time.Minute))
	do("w1", protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: "off-1", ContractRevision: 1,
		ScheduleDisclosure: protocol.ScheduleDisclosure{EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(now), To: protocol.NewTime(now.Add(time.Minute))},
			EstimatedCompletion: eta, Confidence: 0.8, CapacityState: protocol.CapacityAvailable, ComputedAt: protocol.NewTime(now)}})
	if err := loadView(ctx, v, r); err != nil {
		t.Fatal(err)
	}
	after := v.Status()
	st := after.Stages[0]
	if st.State != protocol.WorkQueued || st.Owner != "w1" || st.ETA == nil || !st.ETA.Equal(eta.Time) {
		t.Fatalf("after acceptance: %+v", st)
	}
	lines := review.Changes(before, after)
	if len(lines) != 1 || lines[0] != "stage "+st.Line() {
		t.Fatalf("changes: %q", lines)
	}
	if len(review.Changes(after, after)) != 0 {
		t.Fatal("no change reported as a change")
	}
}

// The watch waits out a lost connection and the authority's retryable
// answers; a refusal or a bad event ends it.
func TestWatchRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("remote: GET /mwp/groups/g/events: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:1/mwp", Err: errors.New("connection refused")}), true},
		{"rate limited", protocol.Errorf(protocol.CodeRateLimited, "slow down"), true},
		{"internal error", protocol.Errorf(protocol.CodeInternalError, "try again"), true},
		{"not a member", protocol.Errorf(protocol.CodeGroupNotFound, "no such group"), false},
		{"a gap in the answer", errors.New("remote: group g answered event e after sequence 3"), false},
	} {
		if got := watchRetryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.name, got, tc.want)
		}
	}
}
