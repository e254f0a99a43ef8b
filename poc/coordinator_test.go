package poc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

func mustKey(t testing.TB, kind protocol.ActorKind, id string) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rig is a real authority with a human owner, coordinators and workers
// played in-process, and the integration repository.
type rig struct {
	t       testing.TB
	dir     string
	svc     *authoritylite.Service
	owner   *authoritylite.Principal
	effects *EffectLog
	workers map[string]*testWorker
	ctx     context.Context
}

func newRig(t testing.TB, clk clock.Clock) *rig {
	t.Helper()
	dir := t.TempDir()
	svc, err := authoritylite.Open(authoritylite.Config{Dir: filepath.Join(dir, "authority"), Clock: clk, Key: mustKey(t, protocol.ActorService, "authority-1")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); svc.Close() })
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	eff, err := OpenEffectLog(filepath.Join(dir, EffectsFile), clk, TinyProject())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eff.Close() })
	return &rig{t: t, dir: dir, svc: svc, owner: svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk), effects: eff,
		workers: map[string]*testWorker{}, ctx: ctx}
}

// worker joins a worker agent with every mission capability.
func (r *rig) worker(id string, nslots int) *testWorker {
	return r.workerWith(id, WorkerCapabilities(), nslots)
}

// workerWith joins a worker agent advertising caps only.
func (r *rig) workerWith(id string, caps []protocol.Capability, nslots int) *testWorker {
	w := newTestWorker(r.t, r.svc, id, caps, nslots, HandlerConfig{Integration: r.effects})
	r.workers[id] = w
	return w
}

// testAndIntegrate are the capabilities of the second worker: Mission A's
// requirements, implementation and review can only run on w1.
var testAndIntegrate = []protocol.Capability{capability(CapTest), capability(CapIntegrate)}

// coordinator joins a coordinator agent for spec.
func (r *rig) coordinator(id string, spec MissionSpec, workers ...string) *Coordinator {
	r.t.Helper()
	key := mustKey(r.t, protocol.ActorAgent, id)
	if err := r.svc.Principal(agent(id), key).Join(r.ctx, AgentCard(id, nil, 1, protocol.RoleCoordinator)); err != nil {
		r.t.Fatalf("join %s: %v", id, err)
	}
	c, err := NewCoordinator(CoordinatorConfig{Service: r.svc, AgentID: id, Key: key, Mission: spec, Workers: workers, LeaseDuration: 10 * time.Minute,
		RequireProvenance: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// waitMission waits (on the log, no sleeps) until the Mission reaches state.
func (r *rig) waitMission(group string, state protocol.MissionState, errc <-chan error) {
	r.t.Helper()
	deadline := time.After(45 * time.Second)
	for {
		last := r.svc.LastSequence(group)
		if m, ok := r.svc.Mission(group); ok && m.State == state {
			return
		}
		select {
		case <-r.svc.Changed(group, last):
		case err := <-errc:
			r.t.Fatalf("coordinator of %s ended before %s: %v", group, state, err)
		case <-deadline:
			m, _ := r.svc.Mission(group)
			r.dump(group)
			r.t.Fatalf("mission of %s is %s, want %s", group, m.State, state)
		}
	}
}

// waitItem waits (on the log) until a WorkItem satisfies ok.
func (r *rig) waitItem(group, id string, what string, ok func(group.WorkItem) bool, errc <-chan error) {
	r.t.Helper()
	deadline := time.After(45 * time.Second)
	for {
		last := r.svc.LastSequence(group)
		if w, found := r.svc.WorkItem(group, id); found && ok(w) {
			return
		}
		select {
		case <-r.svc.Changed(group, last):
		case err := <-errc:
			r.t.Fatalf("coordinator of %s ended before %s was %s: %v", group, id, what, err)
		case <-deadline:
			r.dump(group)
			w, _ := r.svc.WorkItem(group, id)
			r.t.Fatalf("%s is %s (ownership %+v), want %s", id, w.State, w.Ownership, what)
		}
	}
}

// dump logs the workers' errors and the Group's log, for a failed wait.
func (r *rig) dump(group string) {
	for _, w := range r.workers {
		for _, e := range w.errors() {
			r.t.Logf("worker %s: %v", w.id, e)
		}
	}
	for _, ev := range r.events(group) {
		id := ""
		if ev.Aggregate != nil {
			id = ev.Aggregate.ID
		}
		r.t.Logf("%d %s %s %s", ev.Seq(), ev.Type, ev.Actor.ID, id)
	}
}

func (r *rig) events(group string) []protocol.Event {
	r.t.Helper()
	evs, err := r.svc.Events(group, 0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]protocol.Event, len(evs))
	for i, se := range evs {
		if err := json.Unmarshal(se.Raw, &out[i]); err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

func (r *rig) approve(spec MissionSpec, id string) {
	r.t.Helper()
	if _, err := r.owner.Do(r.ctx, protocol.CmdMissionApprove, spec.GroupID, &protocol.ApproveMissionPayload{MissionID: spec.MissionID, ApprovalID: id}); err != nil {
		r.t.Fatal(err)
	}
}

func runCoord(ctx context.Context, c *Coordinator) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	return errc
}

// TestMissionAEndToEnd drives Mission A through every stage with the real
// coordinator, the real handlers in real slots, and workers played by
// Principals, up to the human's approval.
func TestMissionAEndToEnd(t *testing.T) {
	r := newRig(t, nil)
	spec := MissionA(time.Now())
	w1, w2 := r.worker("w1", 2), r.worker("w2", 1)
	coord := r.coordinator("coord-a", spec, "w1", "w2")
	if err := StartMission(r.ctx, r.owner, spec, "coord-a", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	go w1.follow(r.ctx, spec.GroupID)
	go w2.follow(r.ctx, spec.GroupID)
	errc := runCoord(r.ctx, coord)
	r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errc)
	r.approve(spec, "apr-a-1")
	if err := <-errc; err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	for _, w := range r.workers {
		if errs := w.errors(); len(errs) > 0 {
			t.Errorf("worker %s: %v", w.id, errs)
		}
	}
	for _, s := range spec.WorkStages() {
		if wi, _ := r.svc.WorkItem(spec.GroupID, s.WorkItemID); wi.State != protocol.WorkVerified {
			t.Errorf("%s (%s) is %s", s.WorkItemID, s.Name, wi.State)
		}
	}
	// Review order (spec 13.2) is visible in the log: every accepted
	// result carries the three steps in order.
	evs := r.events(spec.GroupID)
	accepted := 0
	for _, ev := range evs {
		if ev.Type != protocol.EvtWorkResultAccepted {
			continue
		}
		accepted++
		var p group.ResultAccepted
		mustJSON(t, ev.Payload, &p)
		var methods []string
		for _, e := range p.Evidence {
			methods = append(methods, strings.TrimSuffix(strings.TrimPrefix(e.Method, "coordinator review: "), " (all checks passed)"))
		}
		if want := []string{ReviewIntegrity, ReviewDeterministic, ReviewSemantic}; !slices.Equal(methods, want) {
			t.Errorf("%s review evidence %v, want %v", p.WorkItemID, methods, want)
		}
	}
	if accepted != len(spec.WorkStages()) {
		t.Errorf("%d results accepted, want %d", accepted, len(spec.WorkStages()))
	}
	for _, rec := range coord.Reviews() {
		if !rec.Accepted || len(rec.Steps) != 3 || rec.Steps[0].Name != ReviewIntegrity || rec.Steps[2].Name != ReviewSemantic {
			t.Errorf("review %+v", rec)
		}
	}
	// Provenance: the patch derives from the requirements note, which
	// derives from the feature request.
	wantOrder := []protocol.EventType{protocol.EvtMissionSubmittedForApproval, protocol.EvtMissionApproved}
	var got []protocol.EventType
	for _, ev := range evs {
		if slices.Contains(wantOrder, ev.Type) {
			got = append(got, ev.Type)
		}
	}
	if !slices.Equal(got, wantOrder) {
		t.Errorf("mission events %v", got)
	}
	// The integration repository holds the feature exactly once.
	recs, err := r.effects.Records()
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := r.effects.Repository()
	if len(recs.Effects) != 1 || repo["calc/clamp.go"] == "" || !strings.Contains(repo["CHANGELOG.md"], "Clamp") {
		t.Errorf("effects %+v, repo files %v", recs.Effects, repo.paths())
	}
}

func mustErrCode(t testing.TB, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// runBoth runs Mission A and Mission B at once; w1 is the only worker
// Mission B may use, and the only one of Mission A's two that can do its
// requirements, implementation and review, so both land on it.
func runBoth(t *testing.T) (*rig, MissionSpec, MissionSpec) {
	r := newRig(t, nil)
	a, b := MissionA(time.Now()), MissionB(time.Now())
	w1, w2 := r.worker("w1", 3), r.workerWith("w2", testAndIntegrate, 1)
	ca := r.coordinator("coord-a", a, "w1", "w2")
	cb := r.coordinator("coord-b", b, "w1")
	for _, m := range []struct {
		spec  MissionSpec
		coord string
	}{{a, "coord-a"}, {b, "coord-b"}} {
		if err := StartMission(r.ctx, r.owner, m.spec, m.coord, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		go w1.follow(r.ctx, m.spec.GroupID)
	}
	go w2.follow(r.ctx, a.GroupID)
	ea, eb := runCoord(r.ctx, ca), runCoord(r.ctx, cb)
	r.waitMission(b.GroupID, protocol.MissionAwaitingApproval, eb)
	r.approve(b, "apr-b-1")
	r.waitMission(a.GroupID, protocol.MissionAwaitingApproval, ea)
	r.approve(a, "apr-a-1")
	for _, errc := range []<-chan error{ea, eb} {
		if err := <-errc; err != nil {
			t.Fatalf("coordinator: %v", err)
		}
	}
	return r, a, b
}

func TestTwoMissionsShareAWorker(t *testing.T) {
	r, a, b := runBoth(t)
	ran := map[string]bool{}
	for _, g := range []string{a.GroupID, b.GroupID} {
		for _, ev := range r.events(g) {
			if ev.Type == protocol.EvtWorkStarted && ev.Actor.ID == "w1" {
				ran[g] = true
			}
		}
		if m, _ := r.svc.Mission(g); m.State != protocol.MissionApproved {
			t.Errorf("%s is %s", g, m.State)
		}
	}
	if !ran[a.GroupID] || !ran[b.GroupID] {
		t.Fatalf("w1 ran work of %v, want both Groups", ran)
	}
}

// Coordinator failover: the first coordinator stops after its first
// accepted review; the owner assigns a replacement (a higher epoch), whose
// replay of the log finishes the Mission; the old one's late commands are
// fenced with AUTH_STALE_COORDINATOR and never reach the log.
func TestCoordinatorFailover(t *testing.T) {
	r := newRig(t, nil)
	spec := MissionA(time.Now())
	w1 := r.worker("w1", 2)
	c1 := r.coordinator("coord-a1", spec, "w1")
	c2 := r.coordinator("coord-a2", spec, "w1")
	if err := StartMission(r.ctx, r.owner, spec, "coord-a1", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	go w1.follow(r.ctx, spec.GroupID)
	errc1 := runCoord(r.ctx, c1)
	r.waitItem(spec.GroupID, "wi-a-impl", "verified", func(w group.WorkItem) bool { return w.State == protocol.WorkVerified }, errc1)
	c1.Stop()
	if err := <-errc1; !errors.Is(err, ErrStopped) {
		t.Fatalf("first coordinator: %v", err)
	}
	if c1.Epoch() != 1 {
		t.Fatalf("first epoch %d", c1.Epoch())
	}
	j, err := OpenJournal(filepath.Join(r.dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	fencedAt := r.svc.LastSequence(spec.GroupID) + 1
	next, err := FailoverCoordinator(r.ctx, j, r.owner, c1, c2.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Late commands of the old coordinator are fenced.
	mustErrCode(t, c1.Renew(r.ctx), protocol.CodeAuthStaleCoordinator)
	// Restarted (a new process with the same key), the old coordinator
	// replays the log, sees the newer epoch and stops without acting.
	restarted, err := NewCoordinator(c1.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustErrCode(t, <-runCoord(r.ctx, restarted), protocol.CodeAuthStaleCoordinator)

	errc := runCoord(r.ctx, next)
	r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errc)
	r.approve(spec, "apr-a-1")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if next.Epoch() != 2 {
		t.Fatalf("replacement epoch %d", next.Epoch())
	}
	reviewed := map[string]string{}
	for _, ev := range r.events(spec.GroupID) {
		if ev.Seq() > fencedAt && ev.Actor.ID == "coord-a1" {
			t.Errorf("the fenced coordinator reached the log: %d %s", ev.Seq(), ev.Type)
		}
		if ev.Type == protocol.EvtWorkResultAccepted {
			reviewed[ev.Aggregate.ID] = ev.Actor.ID
		}
	}
	if reviewed["wi-a-impl"] != "coord-a1" || reviewed["wi-a-integ"] != "coord-a2" || len(reviewed) != len(spec.WorkStages()) {
		t.Fatalf("reviews by %v", reviewed)
	}
	st := RunStores{Log: r.svc, Missions: []MissionSpec{spec}, Journal: filepath.Join(r.dir, JournalFile)}
	journal := mustJournal(t, st.Journal)
	res := CheckFault(FaultCoordinatorFailover, st, journal, nil)
	if !res.Injected || !res.Held || !strings.Contains(res.Detail, "epoch 1→2") {
		t.Fatalf("coordinator-failover: %+v", res)
	}
	// Broken: the old coordinator's command reached the log after the
	// reassignment, and its late command was not refused as stale.
	log := editedLog{r.svc, spec.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent {
		out := append([]wss.StoredEvent(nil), evs...)
		var ev protocol.Event
		mustJSON(t, out[len(out)-3].Raw, &ev)
		ev.Actor.ID = "coord-a1"
		out[len(out)-3].Raw, _ = json.Marshal(ev)
		return out
	}}
	journal[0].Code = protocol.CodeInvalidCommand
	res = CheckFault(FaultCoordinatorFailover, RunStores{Log: log, Missions: st.Missions}, journal, nil)
	if !res.Injected || res.Held || !strings.Contains(res.Detail, "by the fenced coordinator coord-a1") {
		t.Fatalf("broken failover: %+v", res)
	}
}
