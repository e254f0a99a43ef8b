package poc

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
)

// TestMissionsOnTheRealRuntime runs both Missions with the real worker
// runtime (runtime.Worker over wss to the embedded authority-lite, its
// queue, scheduler and slots) instead of the test's played workers: the
// real coordinators and handlers take both Missions to approval, and every
// invariant then holds on the stores the run left, real worker stores
// included.
func TestMissionsOnTheRealRuntime(t *testing.T) {
	dir := t.TempDir()
	auth, err := embed.Start(embed.Config{Dir: filepath.Join(dir, "authority"),
		Limits: group.Limits{LeaseDuration: 20 * time.Second, StartWithin: time.Minute, MaxCandidates: 3, BlockedHold: 5 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	svc := auth.Service
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	r := &rig{t: t, dir: dir, svc: svc, owner: svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk), ctx: ctx, workers: map[string]*testWorker{}}
	eff, err := OpenEffectLog(filepath.Join(dir, EffectsFile), clock.Real{}, TinyProject())
	if err != nil {
		t.Fatal(err)
	}
	a, b := MissionA(time.Now()), MissionB(time.Now())
	workerDirs := map[string]string{}
	var stops []func()
	for _, w := range []struct {
		id     string
		groups []string
	}{{"worker-1", []string{a.GroupID, b.GroupID}}, {"worker-2", []string{a.GroupID}}} {
		k := mustKey(t, protocol.ActorAgent, w.id)
		caps := WorkerCapabilities()
		if w.id == "worker-2" {
			caps = testAndIntegrate // so worker-1 must run work of both Groups
		}
		card := AgentCard(w.id, caps, 2)
		// Registered up front so the coordinators can read the card; the
		// runtime registers it again and opens its own session.
		if err := svc.Principal(agent(w.id), k).Join(ctx, card); err != nil {
			t.Fatal(err)
		}
		workerDirs[w.id] = filepath.Join(dir, "workers", w.id)
		cfg := runtime.WorkerConfig{Dir: workerDirs[w.id], Key: k, AgentID: w.id, Card: card, Groups: w.groups,
			Handlers: Handlers(HandlerConfig{AgentID: w.id, Artifacts: svc, Integration: eff}), Tick: 200 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)}
		cfg.UseInProcess(auth)
		wk, err := runtime.NewWorker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- wk.Run(wctx) }()
		stops = append(stops, func() {
			wcancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("worker %s: %v", w.id, err)
			}
		})
	}
	stopAll := func() {
		for _, s := range stops {
			s()
		}
		stops = nil
	}
	defer stopAll()
	errs := map[string]<-chan error{}
	for _, m := range []struct {
		spec    MissionSpec
		workers []string
	}{{a, []string{"worker-1", "worker-2"}}, {b, []string{"worker-1"}}} {
		id := "coord-" + m.spec.GroupID
		c := r.coordinator(id, m.spec, m.workers...)
		c.cfg.RequireProvenance = false // the runtime's manifests name no sources yet
		if err := StartMission(ctx, r.owner, m.spec, id, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		errs[m.spec.GroupID] = runCoord(ctx, c)
	}
	for _, spec := range []MissionSpec{a, b} {
		r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errs[spec.GroupID])
		r.approve(spec, "apr-"+spec.MissionID)
		if err := <-errs[spec.GroupID]; err != nil {
			t.Fatalf("coordinator of %s: %v", spec.MissionID, err)
		}
	}
	stopAll()
	eff.Close()
	st := RunStores{Log: svc, Missions: []MissionSpec{a, b}, Workers: workerDirs, Effects: filepath.Join(dir, EffectsFile)}
	for _, inv := range CheckInvariants(st) {
		t.Logf("%s: %v — %s", inv.Name, inv.Held, inv.Detail)
		if !inv.Held {
			t.Errorf("%s: %s", inv.Name, inv.Detail)
		}
	}
	// worker-1 ran work of both Groups.
	ran := map[string]bool{}
	for _, g := range []string{a.GroupID, b.GroupID} {
		for _, ev := range r.events(g) {
			if ev.Type == protocol.EvtWorkStarted && ev.Actor.ID == "worker-1" {
				ran[g] = true
			}
		}
	}
	if !ran[a.GroupID] || !ran[b.GroupID] {
		t.Fatalf("worker-1 ran work of %v", ran)
	}
}
