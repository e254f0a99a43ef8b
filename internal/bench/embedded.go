package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// embedded is authority-lite started in this process. The owner and the
// coordinator are its in-process principals (their commands skip the
// wire, as a coordinator co-located with the authority would); the
// workers still reach it over wss.
type embedded struct {
	auth *embed.Authority
	svc  *authoritylite.Service
	// purging: the authority purges archived Groups (PurgeAfter), so a
	// finished Group is settled once purged.
	purging bool
	owner   *authoritylite.Principal
	coord   *authoritylite.Principal
	reg     *prometheus.Registry
	dir     string // the authority's data directory
	file    string

	mu    sync.Mutex
	heads map[string]uint64 // each open Group's head when open returned
}

func startEmbedded(ctx context.Context, cfg Config, dir string) (*embedded, error) {
	ec := embed.Config{Dir: filepath.Join(dir, "authority"), Logger: cfg.Logger, NoSync: !cfg.Fsync,
		Limits:    group.Limits{LeaseDuration: 2 * time.Minute, StartWithin: 10 * time.Minute, MaxCandidates: 3, BlockedHold: 30 * time.Minute},
		RateBurst: 1 << 30, RateEvery: time.Nanosecond, CreateBurst: 1 << 30, CreateEvery: time.Nanosecond}
	if cfg.Tune != nil && cfg.Tune.Authority != nil {
		cfg.Tune.Authority(&ec)
	}
	auth, err := embed.Start(ec)
	if err != nil {
		return nil, err
	}
	adir := filepath.Join(dir, "authority")
	e := &embedded{auth: auth, svc: auth.Service, purging: ec.PurgeAfter > 0, reg: prometheus.NewRegistry(), dir: adir, file: filepath.Join(adir, authoritylite.LogFile),
		heads: map[string]uint64{}}
	for _, c := range e.svc.Collectors() {
		if err := e.reg.Register(c); err != nil {
			return e, err
		}
	}
	hk, err := key(protocol.ActorHuman, "alice")
	if err != nil {
		return e, err
	}
	if err := e.svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		return e, err
	}
	e.owner = e.svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	ck, err := key(protocol.ActorAgent, "coord")
	if err != nil {
		return e, err
	}
	e.coord = e.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, ck)
	if err := e.coord.Join(ctx, protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "coord",
		Capabilities: protocol.List[protocol.Capability]{{ID: "mission.coordinate", Version: "1.0.0"}},
		Roles:        protocol.List[protocol.Role]{protocol.RoleCoordinator}, MaxConcurrency: 1}); err != nil {
		return e, fmt.Errorf("join coordinator: %w", err)
	}
	return e, nil
}

func (e *embedded) name() string { return "embedded" }

func (e *embedded) close() error { return e.auth.Close() }

// connect points a worker at the authority, which enrolls it at its
// first HELLO.
func (e *embedded) connect(wc *runtime.WorkerConfig) { wc.UseInProcess(e.auth) }

func (e *embedded) registered(_ context.Context, agentID string) error {
	if e.svc.SessionEpoch(agentID) == 0 {
		return fmt.Errorf("worker %s did not register", agentID)
	}
	return nil
}

// open creates Group g's Mission as the human alice, assigns the
// coordinator and makes every worker a member.
func (e *embedded) open(ctx context.Context, g string, workers []string) error {
	mission := missionOf(g)
	if _, err := e.owner.Do(ctx, protocol.CmdMissionCreate, g, createMission(g)); err != nil {
		return fmt.Errorf("create %s: %w", mission, err)
	}
	if _, err := e.owner.Do(ctx, protocol.CmdMissionAssignCoordinator, g, assignCoordinator(g, "coord")); err != nil {
		return fmt.Errorf("assign coordinator of %s: %w", mission, err)
	}
	for _, id := range workers {
		if _, err := e.coord.Do(ctx, protocol.CmdMembershipChange, g, addWorker(id)); err != nil {
			return fmt.Errorf("add %s to %s: %w", id, g, err)
		}
	}
	e.mu.Lock()
	e.heads[g] = e.svc.LastSequence(g)
	e.mu.Unlock()
	return nil
}

func (e *embedded) groupID(n int) string { return fmt.Sprintf("grp-%d", n+1) }

// finish has the coordinator submit Group g's Mission and alice approve it.
func (e *embedded) finish(ctx context.Context, g string) error {
	if _, err := e.coord.Do(ctx, protocol.CmdMissionSubmitForApproval, g, submission(g, protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"})); err != nil {
		return fmt.Errorf("submit %s for approval: %w", missionOf(g), err)
	}
	if _, err := e.owner.Do(ctx, protocol.CmdMissionApprove, g, approval(g)); err != nil {
		return fmt.Errorf("approve %s: %w", missionOf(g), err)
	}
	return nil
}

func (e *embedded) forget(g string) {
	e.mu.Lock()
	delete(e.heads, g)
	e.mu.Unlock()
}

func (e *embedded) released(g string) bool {
	if e.purging {
		return e.svc.Purged(g)
	}
	return e.svc.Released(g)
}

func (e *embedded) head(g string) (uint64, bool) { return e.svc.LastSequence(g), true }

// usage reads the authority's store and log; its heap, goroutines and
// files are this process's (the soak splits the goroutines).
func (e *embedded) usage(context.Context) (AuthorityUsage, error) {
	u := AuthorityUsage{Source: "process"}
	st, err := storeUsage(e.dir, authoritylite.LogFile, authorityDirs)
	if err != nil {
		return u, err
	}
	u.Store = &st
	for _, m := range []struct {
		name string
		to   **float64
	}{{"mwp_authority_log_events", &u.LogEvents}, {"mwp_authority_groups", &u.Groups}} {
		if v, err := gaugeValue(e.reg, m.name); err == nil {
			*m.to = f64(v)
		}
	}
	return u, nil
}
func (e *embedded) coordinate(ctx context.Context, typ protocol.CommandType, g string, payload any) error {
	_, err := e.coord.Do(ctx, typ, g, payload)
	return err
}

// follow notes the WorkItem events of Group g as the log commits them.
func (e *embedded) follow(ctx context.Context, g string, note noteFunc) error {
	e.mu.Lock()
	after, ok := e.heads[g]
	e.mu.Unlock()
	if !ok {
		after = e.svc.LastSequence(g)
	}
	for {
		changed := e.svc.Changed(g, after)
		evs, err := e.svc.Events(g, after, 0)
		if err != nil {
			return fmt.Errorf("read %s: %w", g, err)
		}
		now := time.Now()
		for _, ev := range evs {
			after = ev.Sequence
			if ev.WorkItemID != "" {
				note(ev.WorkItemID, ev.Type, now, len(ev.Raw))
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// watch needs no workers: the authority counts every command itself.
func (e *embedded) watch([]*runtime.Worker) {}

func (e *embedded) counts(groups []string) (map[string]float64, map[string]uint64, error) {
	commands, err := commandCounts(e.reg, "mwp_authority_commands_total")
	if err != nil {
		return nil, nil, err
	}
	seqs := map[string]uint64{}
	for _, g := range groups {
		seqs[g] = e.svc.LastSequence(g)
	}
	return commands, seqs, nil
}

// limited is none: the embedded authority's rates are set unbounded.
func (e *embedded) limited() (int, time.Duration) { return 0, 0 }

func (e *embedded) files() []string { return []string{e.file} }
