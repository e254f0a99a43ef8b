package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// numberedPlan is the echo-hello example plan as Mission n: its own
// Mission and Group ids, the same stages, so every Mission's log has the
// same shape and its decisions fall at the same log positions.
func numberedPlan(t testing.TB, n int) *plan.Plan {
	t.Helper()
	raw, err := os.ReadFile("../examples/plans/echo-hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.NewReplacer("mis-echo-hello", fmt.Sprintf("mis-echo-hello-%02d", n), "grp-echo-hello", fmt.Sprintf("grp-echo-hello-%02d", n)).Replace(string(raw))
	p, err := plan.Parse(fmt.Sprintf("echo-hello-%02d.yaml", n), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// collisions passes commands through; a command the authority refuses
// as ACTION_ID_COLLISION fails the test and stops it.
type collisions struct {
	Authority
	t    testing.TB
	stop context.CancelFunc
}

func (c collisions) Submit(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
	rc, err := c.Authority.Submit(ctx, raw)
	if protocol.CodeOf(err) == protocol.CodeActionIDCollision {
		c.t.Errorf("%v", err)
		c.stop()
	}
	return rc, err
}

// One coordinator agent, with one session, runs 20 Missions one after
// the other and then 5 at once on one authority; every Mission has the
// same plan shape, so its decisions fall at the same log positions as
// the others'. All are approved and no command is refused as
// ACTION_ID_COLLISION: the coordinator's action ids are unique per Group.
func TestOneCoordinatorManyMissions(t *testing.T) {
	const sequential, concurrent = 20, 5
	// The owner creates 25 Missions within seconds: above the default
	// bound of a human's Mission creations (20 at once).
	base := newRigConfig(t, numberedPlan(t, 0), authoritylite.Config{CreateBurst: sequential + concurrent, CreateEvery: time.Second})
	ctx, cancel := context.WithCancel(base.ctx)
	defer cancel()
	caps := capsOf(base.plan)
	workers := map[string]protocol.PrivateKey{"w1": base.join("w1", caps, protocol.RoleWorker), "w2": base.join("w2", caps, protocol.RoleWorker)}
	coordKey := base.join("c1", []protocol.Capability{{ID: "mission.coordinate", Version: "0.1.0"}}, protocol.RoleCoordinator)
	auth := collisions{Authority: embed.NewActor(base.svc, agentActor("c1")), t: t, stop: cancel}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// mission runs Mission n to approved: the owner creates it and names
	// c1 its coordinator, fake workers do the work, the owner approves
	// once it is submitted (as `up --auto-approve` does).
	mission := func(n int) error {
		r := &rig{t: t, svc: base.svc, plan: numberedPlan(t, n), human: base.human, ctx: ctx}
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		c, err := New(Config{Logger: log, Authority: auth, AgentID: "c1", Key: coordKey, Plan: r.plan, Workers: []string{"w1", "w2"},
			LeaseDuration: 10 * time.Minute, OfferTTL: time.Minute, RunCheck: passingCheck(r.plan)})
		if err != nil {
			return err
		}
		errc := make(chan error, 1)
		go func() { errc <- c.Run(mctx) }()
		g := r.plan.Mission.GroupID
		create := r.plan.CreateMission(base.svc.Now())
		if _, err := r.human.Do(mctx, protocol.CmdMissionCreate, g, &create); err != nil {
			return fmt.Errorf("Mission %d: create: %w", n, err)
		}
		if _, err := r.human.Do(mctx, protocol.CmdMissionAssignCoordinator, g,
			&protocol.AssignCoordinatorPayload{MissionID: r.plan.Mission.ID, AgentID: "c1", LeaseDurationMs: 600000}); err != nil {
			return fmt.Errorf("Mission %d: assign: %w", n, err)
		}
		for id, key := range workers {
			w := &fakeWorker{r: r, id: id, key: key, p: base.svc.Principal(agentActor(id), key), do: func(string, int) fault { return good }, attempts: map[string]int{}}
			go w.run(mctx)
		}
		go r.approve(mctx)
		select {
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("Mission %d: Run: %w", n, err)
			}
		case <-time.After(60 * time.Second):
			m, _ := base.svc.Mission(g)
			return fmt.Errorf("Mission %d is %s, not approved, after a minute\n%s", n, m.State, r.dump())
		}
		if m, _ := base.svc.Mission(g); m.State != protocol.MissionApproved {
			return fmt.Errorf("Mission %d ended %s\n%s", n, m.State, r.dump())
		}
		return nil
	}

	for n := 1; n <= sequential; n++ {
		if err := mission(n); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, concurrent)
	for i := range concurrent {
		wg.Go(func() { errs[i] = mission(sequential + 1 + i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// session is an Authority whose commands carry the session epoch the
// coordinator's process opened, as package remote's do.
type session struct {
	Authority
	epoch uint64
}

func (s session) SessionEpoch() uint64 { return s.epoch }

// A coordinator whose agent opened a newer session elsewhere (a second
// process of the same agent) ends with AUTH_STALE_SESSION at its first
// command instead of retrying a command that can never be accepted.
func TestReplacedSessionEndsTheCoordinator(t *testing.T) {
	r := newRig(t, numberedPlan(t, 1))
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	r.worker("w1", capsOf(r.plan), nil)
	cfg := r.coordinator("c1", "w1")
	cfg.Authority = session{Authority: cfg.Authority, epoch: r.svc.SessionEpoch("c1")}
	// The agent's next session, opened by another process.
	card := protocol.AgentCard{AgentVersion: "0.1.0", OrganizationID: "org-1", DisplayName: "c1", MaxConcurrency: 2,
		Capabilities: []protocol.Capability{{ID: "mission.coordinate", Version: "0.1.0"}}, Roles: []protocol.Role{protocol.RoleCoordinator}}
	if err := r.svc.Principal(agentActor("c1"), cfg.Key).Join(ctx, card); err != nil {
		t.Fatal(err)
	}
	if r.svc.SessionEpoch("c1") == cfg.Authority.SessionEpoch() {
		t.Fatal("no newer session")
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	r.start("c1")
	select {
	case err := <-errc:
		if protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
			t.Fatalf("Run = %v, want AUTH_STALE_SESSION", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the coordinator kept running on a replaced session\n%s", r.dump())
	}
}
