package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// The in-process adapter has the coordinator's method set.
var _ Authority = (*embed.Actor)(nil)

func mustKey(t testing.TB, kind protocol.ActorKind, id string) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func agentActor(id string) protocol.Actor { return protocol.Actor{Kind: protocol.ActorAgent, ID: id} }

func mustPlan(t testing.TB, path string) *plan.Plan {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse(filepath.Base(path), raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rig is a real authority-lite in process, the plan's first approver as
// the Mission's human owner, and fake workers.
type rig struct {
	t     testing.TB
	svc   *authoritylite.Service
	plan  *plan.Plan
	human *authoritylite.Principal
	ctx   context.Context
}

func newRig(t testing.TB, p *plan.Plan) *rig { return newRigClock(t, p, nil) }

// newRigClock is newRig on clk (nil: the real clock).
func newRigClock(t testing.TB, p *plan.Plan, clk clock.Clock) *rig {
	t.Helper()
	return newRigConfig(t, p, authoritylite.Config{Clock: clk})
}

// newRigConfig is newRig with an authority of cfg (its directory and key
// are the rig's).
func newRigConfig(t testing.TB, p *plan.Plan, cfg authoritylite.Config) *rig {
	t.Helper()
	cfg.Dir, cfg.Key = filepath.Join(t.TempDir(), "authority"), mustKey(t, protocol.ActorService, "authority-1")
	svc, err := authoritylite.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); svc.Close() })
	id := p.Approval.Approvers[0]
	hk := mustKey(t, protocol.ActorHuman, id)
	if err := svc.AddPrincipal(protocol.ActorHuman, id, hk.Public()); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, svc: svc, plan: p, human: svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: id}, hk), ctx: ctx}
}

// join registers an agent with caps and opens its session.
func (r *rig) join(id string, caps []protocol.Capability, roles ...protocol.Role) protocol.PrivateKey {
	r.t.Helper()
	key := mustKey(r.t, protocol.ActorAgent, id)
	card := protocol.AgentCard{AgentVersion: "0.1.0", OrganizationID: "org-1", DisplayName: id, Capabilities: caps, Roles: roles, MaxConcurrency: 2}
	if err := r.svc.Principal(agentActor(id), key).Join(r.ctx, card); err != nil {
		r.t.Fatalf("join %s: %v", id, err)
	}
	return key
}

// coordinator joins a coordinator agent and returns its Config.
func (r *rig) coordinator(id string, workers ...string) Config {
	key := r.join(id, []protocol.Capability{{ID: "mission.coordinate", Version: "0.1.0"}}, protocol.RoleCoordinator)
	log := slog.New(slog.NewTextHandler(testWriter{r.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return Config{Logger: log, OnReview: func(rv Review) { r.t.Logf("review %+v", rv) }, Authority: embed.NewActor(r.svc, agentActor(id)), AgentID: id, Key: key, Plan: r.plan, Workers: workers,
		LeaseDuration: 10 * time.Minute, OfferTTL: time.Minute,
		RunCheck: passingCheck(r.plan)}
}

// start creates the Mission as its owner and assigns coordinator id.
func (r *rig) start(id string) {
	r.t.Helper()
	g := r.plan.Mission.GroupID
	create := r.plan.CreateMission(r.svc.Now())
	if _, err := r.human.Do(r.ctx, protocol.CmdMissionCreate, g, &create); err != nil {
		r.t.Fatal(err)
	}
	r.assign(id)
}

func (r *rig) assign(id string) {
	r.t.Helper()
	if _, err := r.human.Do(r.ctx, protocol.CmdMissionAssignCoordinator, r.plan.Mission.GroupID,
		&protocol.AssignCoordinatorPayload{MissionID: r.plan.Mission.ID, AgentID: id, LeaseDurationMs: 600000}); err != nil {
		r.t.Fatal(err)
	}
}

// approve follows the log as the human: it grants execution where a
// contract asks for it and approves the Mission once submitted.
func (r *rig) approve(ctx context.Context) {
	g := r.plan.Mission.GroupID
	follow(ctx, r.svc, g, func(ev *protocol.Event, p any) {
		switch p := p.(type) {
		case *group.OfferAccepted:
			w, _ := r.svc.WorkItem(g, p.WorkItemID)
			if w.Contract.Risk.PreExecutionApproval {
				_, _ = r.human.Do(ctx, protocol.CmdApprovalGrantExecution, g, &protocol.GrantExecutionPayload{ApprovalID: "apr-" + p.WorkItemID + "-" + p.OfferID,
					WorkItemID: p.WorkItemID, ContractRevision: w.Contract.Revision})
			}
		case *group.SubmittedForApproval:
			_, _ = r.human.Do(ctx, protocol.CmdMissionApprove, g, &protocol.ApproveMissionPayload{MissionID: r.plan.Mission.ID, ApprovalID: "apr-mission"})
		}
	})
}

// follow calls fn for every event of a Group, in order, until ctx ends.
// The Group must exist (Changed cannot signal one that does not).
func follow(ctx context.Context, svc *authoritylite.Service, groupID string, fn func(*protocol.Event, any)) {
	var after uint64
	for ctx.Err() == nil {
		changed := svc.Changed(groupID, after)
		evs, err := svc.Events(groupID, after, 0)
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeCursorTooOld {
			// Compacted under a follower that fell behind: it goes on
			// from what is online (what it missed is old news).
			if first, ok := firstOnline(pe); ok {
				after = first - 1
				continue
			}
		}
		for _, se := range evs {
			after = se.Sequence
			var ev protocol.Event
			if json.Unmarshal(se.Raw, &ev) != nil {
				continue
			}
			p, err := group.Decode(ev.Type, ev.Payload)
			if err == nil {
				fn(&ev, p)
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// waitMission waits on the log until the Mission reaches state.
// A Run that ends is handed back on errc (buffered, size 1) when the
// Mission did reach state: it may end before this sees the last event.
func (r *rig) waitMission(state protocol.MissionState, errc chan error) {
	r.t.Helper()
	g := r.plan.Mission.GroupID
	deadline := time.After(60 * time.Second)
	reached := func() bool { m, ok := r.svc.Mission(g); return ok && m.State == state }
	for {
		last := r.svc.LastSequence(g)
		if reached() {
			return
		}
		select {
		case <-r.svc.Changed(g, last):
		case err := <-errc:
			if reached() {
				errc <- err
				return
			}
			r.t.Fatalf("the coordinator ended before %s: %v\n%s", state, err, r.dump())
		case <-deadline:
			r.t.Fatalf("the Mission is not %s\n%s", state, r.dump())
		}
	}
}

// waitItem waits on the log until a WorkItem satisfies ok.
func (r *rig) waitItem(id string, ok func(group.WorkItem) bool, errc <-chan error) {
	r.t.Helper()
	g := r.plan.Mission.GroupID
	deadline := time.After(60 * time.Second)
	for {
		last := r.svc.LastSequence(g)
		if w, found := r.svc.WorkItem(g, id); found && ok(w) {
			return
		}
		select {
		case <-r.svc.Changed(g, last):
		case err := <-errc:
			r.t.Fatalf("the coordinator ended early: %v\n%s", err, r.dump())
		case <-deadline:
			r.t.Fatalf("%s never got there\n%s", id, r.dump())
		}
	}
}

// dump renders the log, one event a line, for failures.
func (r *rig) dump() string {
	evs, _ := r.svc.Events(r.plan.Mission.GroupID, 0, 0)
	out := ""
	for _, se := range evs {
		var ev protocol.Event
		_ = json.Unmarshal(se.Raw, &ev)
		id := ""
		if ev.Aggregate != nil {
			id = ev.Aggregate.ID
		}
		out += fmt.Sprintf("%d %s %s %s\n", se.Sequence, ev.Type, ev.Actor.ID, id)
	}
	return out
}

// behaviour says what a fake worker does with attempt n (1-based) of a
// stage: submit good outputs, or one of the faults.
type behaviour func(stage string, attempt int) fault

type fault int

const (
	good     fault = iota
	noOutput       // submits without its required outputs' media types
	stall          // accepts, never starts (the start deadline lapses)
	reject         // a reviewer: submits a failing verdict on what it reviews
)

// fakeWorker accepts offers made to it, starts what it won and submits
// outputs for every required output with passing evidence per criterion.
type fakeWorker struct {
	r   *rig
	id  string
	key protocol.PrivateKey
	p   *authoritylite.Principal
	do  behaviour

	mu       sync.Mutex
	attempts map[string]int
}

func (r *rig) worker(id string, caps []protocol.Capability, do behaviour) *fakeWorker {
	key := r.join(id, caps, protocol.RoleWorker)
	w := &fakeWorker{r: r, id: id, key: key, p: r.svc.Principal(agentActor(id), key), do: do, attempts: map[string]int{}}
	if w.do == nil {
		w.do = func(string, int) fault { return good }
	}
	return w
}

func (w *fakeWorker) setBehaviour(do behaviour) {
	w.mu.Lock()
	w.do = do
	w.mu.Unlock()
}

func (w *fakeWorker) run(ctx context.Context) {
	g := w.r.plan.Mission.GroupID
	follow(ctx, w.r.svc, g, func(ev *protocol.Event, p any) {
		switch p := p.(type) {
		case *group.OfferCreated:
			cur, _ := w.r.svc.WorkItem(g, p.WorkItemID)
			if cur.Offer == nil || cur.Offer.OfferID != p.OfferID || !slices.ContainsFunc(p.Candidates, func(c protocol.OfferCandidate) bool { return c.AgentID == w.id }) {
				return
			}
			now := w.r.svc.Now()
			_, err := w.p.Do(ctx, protocol.CmdWorkAcceptOffer, g, &protocol.AcceptOfferPayload{WorkItemID: p.WorkItemID, OfferID: p.OfferID,
				ContractRevision: p.ContractRevision, ScheduleDisclosure: protocol.ScheduleDisclosure{
					EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(now), To: protocol.NewTime(now.Add(time.Minute))},
					EstimatedCompletion:  protocol.NewTime(now.Add(10 * time.Minute)), Confidence: 0.7, CapacityState: protocol.CapacityAvailable,
					ComputedAt: protocol.NewTime(now)}})
			if err != nil {
				w.r.t.Logf("%s accept %s: %v", w.id, p.OfferID, err)
			}
		case *group.OfferAccepted, *group.ExecutionGranted:
			w.maybeStart(ctx, p.(group.WorkPayload).Ref().WorkItemID)
		}
	})
}

func (w *fakeWorker) maybeStart(ctx context.Context, id string) {
	g := w.r.plan.Mission.GroupID
	cur, ok := w.r.svc.WorkItem(g, id)
	if !ok || cur.State != protocol.WorkQueued || cur.Ownership == nil || cur.Ownership.OwnerAgentID != w.id {
		return
	}
	if cur.Contract.Risk.PreExecutionApproval && cur.ExecutionApproval == nil {
		return // the human grants it; its event brings us back
	}
	stage := id[len(w.r.plan.Mission.ID)+1:]
	w.mu.Lock()
	w.attempts[id]++
	n := w.attempts[id]
	f := w.do(stage, n)
	w.mu.Unlock()
	if f == stall {
		return
	}
	if _, err := w.p.Do(ctx, protocol.CmdWorkStart, g, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: cur.Ownership.OwnershipEpoch}); err != nil {
		return
	}
	cur, _ = w.r.svc.WorkItem(g, id)
	var arts []string
	for _, o := range cur.Contract.RequiredOutputs {
		mt := o.MediaType
		if f == noOutput {
			mt = "application/octet-stream"
		}
		// The same bytes for every item with an output of this type: one
		// content may be published for several items, each with its manifest.
		d, err := w.publish(ctx, cur, mt, []byte(fmt.Sprintf("%s output of attempt %d\n", mt, n)))
		if err != nil {
			w.r.t.Errorf("%s publish: %v", w.id, err)
			return
		}
		arts = append(arts, d)
	}
	var ev []protocol.Evidence
	for _, ac := range cur.Contract.AcceptanceCriteria {
		ev = append(ev, protocol.Evidence{Subject: id, Criteria: protocol.List[string]{ac.ID}, Method: "fake worker", Result: protocol.EvidencePass,
			Producer: agentActor(w.id), Timestamp: protocol.NewTime(w.r.svc.Now()), Artifacts: protocol.List[string](arts)})
	}
	if f == reject {
		for _, s := range w.r.plan.Stage(stage).Reviews {
			ev = append(ev, protocol.Evidence{Subject: w.r.plan.Stage(s).WorkItemID, Criteria: protocol.List[string]{cur.Contract.AcceptanceCriteria[0].ID},
				Method: "fake review", Result: protocol.EvidenceFail, Producer: agentActor(w.id), Timestamp: protocol.NewTime(w.r.svc.Now()), Artifacts: protocol.List[string](arts)})
		}
	}
	if _, err := w.p.Do(ctx, protocol.CmdWorkSubmit, g, &protocol.SubmitWorkPayload{WorkItemID: id, OwnershipEpoch: cur.Ownership.OwnershipEpoch,
		LeaseID: cur.Lease.LeaseID, Artifacts: arts, Evidence: ev}); err != nil {
		w.r.t.Errorf("%s submit %s: %v", w.id, id, err)
	}
}

// publish stores data and publishes its signed manifest under the lease.
func (w *fakeWorker) publish(ctx context.Context, cur group.WorkItem, mediaType string, data []byte) (string, error) {
	d, err := w.r.svc.PutArtifact(data)
	if err != nil {
		return "", err
	}
	card, _ := w.r.svc.AgentCard(w.id)
	raw, err := protocol.Marshal(card)
	if err != nil {
		return "", err
	}
	now := protocol.NewTime(w.r.svc.Now())
	m := protocol.ArtifactManifest{ContentHash: d, MediaType: mediaType, Schema: protocol.ManifestSchema("", mediaType),
		Producer:  protocol.ArtifactProducer{AgentID: w.id, AgentVersion: card.AgentVersion, AgentCardHash: protocol.Digest(raw)},
		MissionID: cur.MissionID, GroupID: cur.GroupID, WorkItemID: cur.WorkItemID, SourceArtifacts: protocol.List[string]{},
		ToolVersions: protocol.StringMap{"fake": "1"}, CreatedAt: now, Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: "mwp-artifact:" + d}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: w.key.KeyID, CreatedAt: now}
	signed, err := protocol.SignedValue(m, w.key)
	if err != nil {
		return "", err
	}
	var sm protocol.ArtifactManifest
	if err := json.Unmarshal(signed, &sm); err != nil {
		return "", err
	}
	_, err = w.p.Do(ctx, protocol.CmdArtifactPublish, cur.GroupID, &protocol.PublishArtifactPayload{Manifest: sm,
		OwnershipEpoch: protocol.Uint64(cur.Ownership.OwnershipEpoch), LeaseID: cur.Lease.LeaseID})
	return d, err
}

// capsOf are capabilities satisfying every stage of p.
func capsOf(p *plan.Plan) []protocol.Capability {
	var out []protocol.Capability
	for _, s := range p.Stages {
		out = append(out, protocol.Capability{ID: s.Capability.ID, Version: concrete(s.Capability.Version)})
	}
	return out
}

// concrete turns a version range into a version it admits.
func concrete(r string) string {
	switch parts := splitDots(r); len(parts) {
	case 2:
		return parts[0] + ".0.0"
	case 3:
		if parts[2] == "x" {
			return parts[0] + "." + parts[1] + ".0"
		}
	}
	return r
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// passingCheck is a RunCheck under which every check of p passes.
func passingCheck(p *plan.Plan) func(context.Context, CheckRun) (CheckResult, error) {
	return func(_ context.Context, run CheckRun) (CheckResult, error) {
		for _, s := range p.Stages {
			for _, c := range s.Checks {
				if c.Name == run.Name && slices.Equal(c.Command, run.Command) {
					return CheckResult{ExitCode: c.Pass.ExitCode, Stdout: c.Pass.StdoutContains}, nil
				}
			}
		}
		return CheckResult{}, fmt.Errorf("no check %s in the plan", run.Name)
	}
}

// launch starts a coordinator of cfg, then the rig's Mission ("c1" its
// coordinator) and the workers; Run's result arrives on the channel.
func (r *rig) launch(ctx context.Context, cfg Config, workers ...*fakeWorker) (*Coordinator, chan error) {
	r.t.Helper()
	c, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	r.start("c1")
	for _, w := range workers {
		go w.run(ctx)
	}
	return c, errc
}
