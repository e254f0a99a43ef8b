package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// onceRule fails the first submission of a stage in one step.
type onceRule struct {
	step string // StepChecks or StepSemantic
	mu   sync.Mutex
	seen map[string]int
}

func (o *onceRule) problems(step string, in ReviewInput) []string {
	if step != o.step {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[in.Stage.ID]++
	if len(in.Outputs) == 0 || in.Input == nil {
		return []string{"the rule saw no outputs"}
	}
	if in.Stage.ID == "draft" && o.seen["draft"] == 1 {
		return []string{"the first draft is never good enough"}
	}
	return nil
}

func (o *onceRule) Checks(_ context.Context, in ReviewInput) []string {
	return o.problems(StepChecks, in)
}
func (o *onceRule) Semantic(_ context.Context, in ReviewInput) []string {
	return o.problems(StepSemantic, in)
}

// Rules written in Go fail a submission in the step they belong to; the
// item is retried and the Mission still ends approved.
func TestRulesFailInTheirStep(t *testing.T) {
	for _, step := range []string{StepChecks, StepSemantic} {
		t.Run(step, func(t *testing.T) {
			p := parsePlan(t, reviewedPlan)
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			w := r.worker("w1", capsOf(p), nil)
			cfg := r.coordinator("c1", "w1")
			cfg.Rules = &onceRule{step: step, seen: map[string]int{}}
			var mu sync.Mutex
			var failedIn []string
			cfg.OnReview = func(rv Review) {
				mu.Lock()
				defer mu.Unlock()
				for _, s := range rv.Steps {
					if !s.Passed {
						failedIn = append(failedIn, rv.WorkItemID+":"+s.Name)
					}
				}
			}
			_, errc := r.launch(ctx, cfg, w)
			go r.approve(ctx)
			r.waitMission(protocol.MissionApproved, errc)
			mu.Lock()
			defer mu.Unlock()
			if want := []string{p.Stage("draft").WorkItemID + ":" + step}; !slices.Equal(failedIn, want) {
				t.Fatalf("failed steps %v, want %v\n%s", failedIn, want, r.dump())
			}
		})
	}
}

// inputPlan's first stage reads a request the coordinator makes.
func inputPlan(digest string) string {
	return strings.Replace(reviewedPlan, "    budgets: {money: 1}\n", fmt.Sprintf("    inputs: [{artifact: %q, name: request}]\n    budgets: {money: 1}\n", digest), 1)
}

// A coordinator-made input is stored and published under the item that
// reads it, with the coordinator as producer, before that item is offered.
// With provenance required, outputs that do not list it are failed.
func TestInputsPublishedBeforeTheOffer(t *testing.T) {
	in := Input{MediaType: "application/json", Data: []byte(`{"feature":"clamp"}`)}
	digest := protocol.Digest(in.Data)
	for _, tc := range []struct {
		name       string
		provenance bool
		want       protocol.MissionState
	}{
		{name: "published", want: protocol.MissionApproved},
		// The fake worker lists no sources: every attempt fails.
		{name: "provenance required", provenance: true, want: protocol.MissionTerminated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parsePlan(t, inputPlan(digest))
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			w := r.worker("w1", capsOf(p), nil)
			cfg := r.coordinator("c1", "w1")
			cfg.Inputs, cfg.RequireProvenance = []Input{in}, tc.provenance
			_, errc := r.launch(ctx, cfg, w)
			go r.approve(ctx)
			r.waitMission(tc.want, errc)
			draft := p.Stage("draft").WorkItemID
			var publishedAt, offeredAt uint64
			var producer string
			follow1(r, func(ev *protocol.Event) {
				switch {
				case ev.Type == protocol.EvtArtifactPublished && publishedAt == 0:
					a, err := group.DecodeAs[group.ArtifactPublished](ev)
					if err == nil && a.Manifest.ContentHash == digest && a.Manifest.WorkItemID == draft {
						publishedAt, producer = ev.Seq(), a.Manifest.Producer.AgentID
					}
				case ev.Type == protocol.EvtWorkOfferCreated && ev.Aggregate.ID == draft && offeredAt == 0:
					offeredAt = ev.Seq()
				}
			})
			if publishedAt == 0 || offeredAt == 0 || publishedAt > offeredAt || producer != "c1" {
				t.Fatalf("input published at %d by %q, draft offered at %d\n%s", publishedAt, producer, offeredAt, r.dump())
			}
			if got := r.counts(protocol.EvtWorkFailed)[draft]; (got > 0) != tc.provenance {
				t.Fatalf("draft failed %d times, provenance required %v\n%s", got, tc.provenance, r.dump())
			}
		})
	}
}

// A change request is answered by the stages Rework names: the request is
// published as their input, they run, and only then is the Mission
// submitted again. Without Rework it is submitted again at once.
func TestReworkAnswersAChangeRequest(t *testing.T) {
	for _, withRework := range []bool{true, false} {
		t.Run(fmt.Sprintf("rework=%v", withRework), func(t *testing.T) {
			p := parsePlan(t, reviewedPlan)
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			w := r.worker("w1", capsOf(p), nil)
			cfg := r.coordinator("c1", "w1")
			if withRework {
				cfg.Rework = func(round int, request string, accepted func(string) []Output) []plan.Stage {
					if accepted(p.Stage("draft").WorkItemID) == nil {
						return nil
					}
					s := *p.Stage("draft")
					s.ID = fmt.Sprintf("draft-r%d", round)
					s.WorkItemID, s.ContractID = p.Mission.ID+":"+s.ID, p.Mission.ID+":"+s.ID+":contract"
					s.Inputs = []protocol.InputRef{{Artifact: request, Name: "change-request"}}
					s.DependsOn = []plan.Dependency{{Stage: "draft", Policy: protocol.DependencyVerified}}
					return []plan.Stage{s}
				}
			}
			_, errc := r.launch(ctx, cfg, w)
			g := p.Mission.GroupID
			submitted := 0 // the human asks for changes once, then approves
			go follow(ctx, r.svc, g, func(ev *protocol.Event, _ any) {
				if ev.Type != protocol.EvtMissionSubmittedForApproval {
					return
				}
				if submitted++; submitted == 1 {
					_, _ = r.human.Do(ctx, protocol.CmdMissionRequestChanges, g, &protocol.RequestChangesPayload{MissionID: p.Mission.ID, Changes: []string{"say more"}})
					return
				}
				_, _ = r.human.Do(ctx, protocol.CmdMissionApprove, g, &protocol.ApproveMissionPayload{MissionID: p.Mission.ID, ApprovalID: "apr-mission"})
			})
			r.waitMission(protocol.MissionApproved, errc)
			rework := p.Mission.ID + ":draft-r1"
			var changedAt, reworkVerifiedAt, resubmittedAt uint64
			var requestPublished bool
			follow1(r, func(ev *protocol.Event) {
				switch {
				case ev.Type == protocol.EvtMissionChangesRequested:
					changedAt = ev.Seq()
				case ev.Type == protocol.EvtWorkResultAccepted && ev.Aggregate.ID == rework:
					reworkVerifiedAt = ev.Seq()
				case ev.Type == protocol.EvtMissionSubmittedForApproval && changedAt > 0:
					resubmittedAt = ev.Seq()
				case ev.Type == protocol.EvtArtifactPublished:
					a, err := group.DecodeAs[group.ArtifactPublished](ev)
					requestPublished = requestPublished || err == nil && a.Manifest.ContentHash == protocol.Digest(ChangeRequest{Changes: []string{"say more"}}.Bytes())
				}
			})
			if changedAt == 0 || resubmittedAt == 0 {
				t.Fatalf("changes at %d, resubmitted at %d\n%s", changedAt, resubmittedAt, r.dump())
			}
			if withRework != (reworkVerifiedAt > changedAt && reworkVerifiedAt < resubmittedAt && requestPublished) {
				t.Fatalf("rework %v: verified at %d, request published %v, resubmitted at %d\n%s", withRework, reworkVerifiedAt, requestPublished, resubmittedAt, r.dump())
			}
		})
	}
}

// While Rework cannot name a round's stages yet, nothing is submitted
// for approval; once it does, they are authorized before the Mission is
// submitted again.
func TestDecideWaitsForTheRework(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	workers := []Worker{{AgentID: "w1", Capabilities: capsOf(p)}}
	redo := *p.Stage("draft")
	redo.ID, redo.WorkItemID = "draft-r1", p.Mission.ID+":draft-r1"
	for _, tc := range []struct {
		name  string
		stage []plan.Stage
		want  string
	}{
		{name: "not known yet", want: ""},
		{name: "known", stage: []plan.Stage{redo}, want: "authorize draft-r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := stateView(t, p, protocol.WorkVerified, protocol.WorkVerified)
			v.changes = []ChangeRequest{{Changes: []string{"say more"}}}
			pol := policy{me: "c1", leaseDuration: 10 * time.Minute, offerTTL: time.Minute, maxCandidates: 3, prechecked: map[string]uint64{},
				rework: func(int, string, func(string) []Output) []plan.Stage { return tc.stage }}
			if got := kinds(decide(v, p, workers, t0, pol)); got != tc.want {
				t.Fatalf("decide = %q, want %q", got, tc.want)
			}
		})
	}
}

// A worker whose first card lacks the capability is offered the work
// once it registers a card that has it: the coordinator reads the cards
// again while an item waits with no eligible worker.
func TestCardsReadAgainWhileAnItemWaits(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	r := newRig(t, p)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	w := r.worker("w1", []protocol.Capability{{ID: "docs.translate", Version: "1.0.0"}}, nil)
	cfg := r.coordinator("c1", "w1")
	cfg.CardRefresh = 20 * time.Millisecond
	_, errc := r.launch(ctx, cfg)
	// Authorized, no one to offer it to.
	r.waitItem(p.Stage("draft").WorkItemID, func(w group.WorkItem) bool { return w.State == protocol.WorkOpen }, errc)
	card := protocol.AgentCard{AgentVersion: "0.2.0", OrganizationID: "org-1", DisplayName: "w1", Capabilities: capsOf(p), Roles: []protocol.Role{protocol.RoleWorker}, MaxConcurrency: 2}
	if err := w.p.Join(ctx, card); err != nil {
		t.Fatal(err)
	}
	go w.run(ctx)
	go r.approve(ctx)
	r.waitMission(protocol.MissionApproved, errc)
}
