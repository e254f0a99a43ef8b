package coordinator

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// reviewedPlan is a draft with a reviewer stage over it; both may be
// tried twice, with no backoff.
const reviewedPlan = `version: 1
mission: {id: mis-r, groupId: grp-r, title: Reviewed, objective: A draft and its review., deadline: 24h}
approval: {approvers: [erin]}
stages:
  - id: draft
    goal: Draft it.
    capability: {id: docs.write, version: 1.x}
    acceptance: [{id: done, description: Drafted., evidence: [the draft]}]
    outputs: [{name: notes, mediaType: text/markdown}]
    budgets: {money: 1}
    retry: {maxAttempts: 2, backoff: {initialMs: 0, maxMs: 0, multiplier: 1}}
    checks: [{name: lint, command: [lint, notes.md]}]
  - id: proofread
    goal: Proofread it.
    capability: {id: docs.review, version: 1.x}
    reviews: [draft]
    acceptance: [{id: ok, description: Proofread., evidence: [a verdict]}]
    outputs: [{name: review, mediaType: text/markdown}]
    budgets: {money: 1}
    retry: {maxAttempts: 2, backoff: {initialMs: 0, maxMs: 0, multiplier: 1}}
`

func parsePlan(t testing.TB, text string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// counts tallies the log's events of typ per WorkItem.
func (r *rig) counts(typ protocol.EventType) map[string]int {
	out := map[string]int{}
	follow1(r, func(ev *protocol.Event) {
		if ev.Type == typ && ev.Aggregate != nil {
			out[ev.Aggregate.ID]++
		}
	})
	return out
}

func follow1(r *rig, fn func(*protocol.Event)) {
	ctx, cancel := context.WithCancel(r.ctx)
	last := r.svc.LastSequence(r.plan.Mission.GroupID)
	follow(ctx, r.svc, r.plan.Mission.GroupID, func(ev *protocol.Event, _ any) {
		fn(ev)
		if ev.Seq() >= last {
			cancel()
		}
	})
}

// A failing review fails the item (work.fail) and the coordinator retries
// it within its retry policy; past the policy the Mission is terminated.
func TestReviewFailuresRetryPerPolicy(t *testing.T) {
	failCheck := errors.New("lint crashed")
	for _, tc := range []struct {
		name string
		plan string
		// check fails the n-th run of a check when it returns an error
		// or a non-zero exit.
		check  func(n int) (CheckResult, error)
		do     behaviour
		want   protocol.MissionState
		failed map[string]int // work.failed per stage
	}{
		{name: "check fails once, retried", plan: reviewedPlan,
			check: func(n int) (CheckResult, error) { return CheckResult{ExitCode: map[bool]int{true: 1}[n == 1]}, nil },
			want:  protocol.MissionApproved, failed: map[string]int{"draft": 1}},
		{name: "check cannot run, twice", plan: reviewedPlan,
			check: func(int) (CheckResult, error) { return CheckResult{}, failCheck },
			want:  protocol.MissionTerminated, failed: map[string]int{"draft": 2}},
		{name: "required output missing once", plan: reviewedPlan,
			do: func(stage string, n int) fault {
				if stage == "draft" && n == 1 {
					return noOutput
				}
				return good
			},
			want: protocol.MissionApproved, failed: map[string]int{"draft": 1}},
		{name: "reviewer rejects once", plan: reviewedPlan,
			do: func(stage string, n int) fault {
				if stage == "proofread" && n == 1 {
					return reject
				}
				return good
			},
			want: protocol.MissionApproved, failed: map[string]int{"draft": 1, "proofread": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parsePlan(t, tc.plan)
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			caps := capsOf(p)
			workers := []*fakeWorker{r.worker("w1", caps, tc.do)}
			cfg := r.coordinator("c1", "w1")
			if tc.check != nil {
				var mu sync.Mutex
				n := 0
				cfg.RunCheck = func(context.Context, CheckRun) (CheckResult, error) {
					mu.Lock()
					defer mu.Unlock()
					n++
					return tc.check(n)
				}
			}
			_, errc := r.launch(ctx, cfg, workers...)
			go r.approve(ctx)
			r.waitMission(tc.want, errc)
			failed := r.counts(protocol.EvtWorkFailed)
			for _, s := range p.Stages {
				if got := failed[s.WorkItemID]; got != tc.failed[s.ID] && tc.want == protocol.MissionApproved {
					t.Errorf("%s failed %d times, want %d\n%s", s.ID, got, tc.failed[s.ID], r.dump())
				}
			}
			if tc.want == protocol.MissionTerminated && failed[p.Stages[0].WorkItemID] != tc.failed["draft"] {
				t.Errorf("draft failed %d times before the Mission was terminated, want %d\n%s", failed[p.Stages[0].WorkItemID], tc.failed["draft"], r.dump())
			}
		})
	}
}

// An owner that misses its start deadline is fenced by a new offer with a
// higher ownership epoch, made to another worker.
func TestMissedStartDeadlineReoffersElsewhere(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	clk := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	r := newRigClock(t, p, clk)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	caps := capsOf(p)
	stallFirst := func(stage string, n int) fault {
		if stage == "draft" {
			return stall
		}
		return good
	}
	// w1 ranks first (id order) and stalls; w2 does the work.
	workers := []*fakeWorker{r.worker("w1", caps, stallFirst), r.worker("w2", caps, nil)}
	cfg := r.coordinator("c1", "w1", "w2")
	cfg.Clock = clk
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.start("c1") // first: before the Group exists the coordinator waits on the clock
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	for _, w := range workers {
		go w.run(ctx)
	}
	go r.approve(ctx)
	draft := p.Stages[0].WorkItemID
	r.waitItem(draft, func(w group.WorkItem) bool { return w.State == protocol.WorkQueued }, errc)
	if w, _ := r.svc.WorkItem(p.Mission.GroupID, draft); w.Ownership.OwnerAgentID != "w1" {
		t.Fatalf("draft owned by %s, want w1 (the first ranked)", w.Ownership.OwnerAgentID)
	}
	clk.Advance(6 * time.Minute) // past the five-minute start deadline
	c.Poke()
	r.waitMission(protocol.MissionApproved, errc)
	var offers []*group.OfferCreated
	follow1(r, func(ev *protocol.Event) {
		if ev.Type == protocol.EvtWorkOfferCreated && ev.Aggregate.ID == draft {
			o, err := group.DecodeAs[group.OfferCreated](ev)
			if err != nil {
				t.Fatal(err)
			}
			offers = append(offers, o)
		}
	})
	renewed := 0
	follow1(r, func(ev *protocol.Event) {
		if ev.Type == protocol.EvtMissionCoordinatorRenewed {
			renewed++
		}
	})
	if renewed == 0 {
		t.Errorf("six minutes into a ten-minute coordinator lease it was not renewed\n%s", r.dump())
	}
	if len(offers) != 2 || offers[1].FencedOwnershipEpoch == nil || offers[1].Candidates[0].AgentID != "w2" {
		t.Fatalf("offers of draft: %+v\n%s", offers, r.dump())
	}
	w, _ := r.svc.WorkItem(p.Mission.GroupID, draft)
	if w.Ownership.OwnershipEpoch <= *offers[1].FencedOwnershipEpoch {
		t.Fatalf("new ownership epoch %d is not above the fenced %d", w.Ownership.OwnershipEpoch, *offers[1].FencedOwnershipEpoch)
	}
}

// Reassigning the Mission fences the first coordinator: its Run ends with
// AUTH_STALE_COORDINATOR, and the new one finishes the Mission.
func TestReassignmentFencesTheOldCoordinator(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	r := newRig(t, p)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	w := r.worker("w1", capsOf(p), func(stage string, _ int) fault {
		if stage == "draft" {
			return stall // hold the Mission open until c2 takes over
		}
		return good
	})
	cfg1 := r.coordinator("c1", "w1")
	c1, err := New(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := r.coordinator("c2", "w1")
	c2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c1.Run(ctx) }()
	r.start("c1")
	go w.run(ctx)
	go r.approve(ctx)
	r.waitItem(p.Stages[0].WorkItemID, func(w group.WorkItem) bool { return w.State == protocol.WorkQueued }, errc)
	r.assign("c2")
	select {
	case err := <-errc:
		if protocol.CodeOf(err) != protocol.CodeAuthStaleCoordinator {
			t.Fatalf("c1 Run = %v, want AUTH_STALE_COORDINATOR", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("c1 kept running after its replacement")
	}
	// Restarted on the same log, c1 sees it was replaced and stops
	// without acting, rather than waiting for a lease it will not get.
	restarted, err := New(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if err := restarted.Run(rctx); protocol.CodeOf(err) != protocol.CodeAuthStaleCoordinator {
		t.Fatalf("restarted c1 Run = %v, want AUTH_STALE_COORDINATOR", err)
	}
	go func() { errc <- c2.Run(ctx) }()
	// The worker now starts the item it held (its ownership stands under
	// the new coordinator) and the rest follows.
	w.setBehaviour(func(string, int) fault { return good })
	w.maybeStart(ctx, p.Stages[0].WorkItemID)
	r.waitMission(protocol.MissionApproved, errc)
}

// flaky is an Authority whose reads fail transiently, in turn: the log
// read, the artifact read and the card read each fail the first n times.
type flaky struct {
	Authority
	mu                   sync.Mutex
	events, reads, cards int
	eventErr, readErr    error
}

func (f *flaky) fail(n *int, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n > 0 {
		*n--
		return err
	}
	return nil
}

func (f *flaky) Events(ctx context.Context, groupID string, after uint64, max int) ([]SignedEvent, error) {
	if err := f.fail(&f.events, f.eventErr); err != nil {
		return nil, err
	}
	return f.Authority.Events(ctx, groupID, after, max)
}

func (f *flaky) Artifact(ctx context.Context, digest string) ([]byte, error) {
	if err := f.fail(&f.reads, f.readErr); err != nil {
		return nil, err
	}
	return f.Authority.Artifact(ctx, digest)
}

func (f *flaky) AgentCard(ctx context.Context, agentID string) (protocol.AgentCard, error) {
	if err := f.fail(&f.cards, protocol.Errorf(protocol.CodeInternalError, "cards unavailable")); err != nil {
		return protocol.AgentCard{}, err
	}
	return f.Authority.AgentCard(ctx, agentID)
}

// Transient failures of the authority (rate limited, internal errors, an
// unreachable address) neither end Run nor decide a review: the Mission is
// approved with no stage failed. A permanent refusal still ends Run.
func TestTransientAuthorityFailuresRetried(t *testing.T) {
	unreachable := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/mwp/groups/grp-r/events", Err: errors.New("connection refused")}
	p := parsePlan(t, reviewedPlan)
	r := newRig(t, p)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	cfg := r.coordinator("c1", "w1")
	f := &flaky{Authority: cfg.Authority, events: 3, reads: 3, cards: 2, eventErr: unreachable,
		readErr: protocol.Errorf(protocol.CodeRateLimited, "too many requests from this address")}
	cfg.Authority = f
	_, errc := r.launch(ctx, cfg, r.worker("w1", capsOf(p), nil))
	go r.approve(ctx)
	r.waitMission(protocol.MissionApproved, errc)
	if failed := r.counts(protocol.EvtWorkFailed); len(failed) != 0 {
		t.Fatalf("stages failed %v: a transient read decided a review\n%s", failed, r.dump())
	}
	if f.events != 0 || f.reads != 0 || f.cards != 0 {
		t.Fatalf("failures not all met: events %d, reads %d, cards %d", f.events, f.reads, f.cards)
	}

	// A refusal that stands is returned.
	bad := &flaky{Authority: cfg.Authority.(*flaky).Authority, events: 1, eventErr: protocol.Errorf(protocol.CodeProtocolViolation, "bad event")}
	cfg.Authority = bad
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); protocol.CodeOf(err) != protocol.CodeProtocolViolation {
		t.Fatalf("Run: %v, want the PROTOCOL_VIOLATION", err)
	}
}
