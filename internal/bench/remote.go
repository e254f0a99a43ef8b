package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// Remote is a running authority a run targets, and who the run is there.
// Every principal must be known to it already: the owner a human it
// registered (authority serve --human), the coordinator and each worker
// enrolled agents (docs/operations.md, "Adding an agent"), the
// coordinator's card declaring the coordinator role.
type Remote struct {
	URL                   string
	Trust                 remote.Trust
	AllowInsecureLoopback bool
	// AuthorityKeys verifies every event the driver and the workers read.
	AuthorityKeys protocol.KeyResolver
	Owner         Identity   // creates the run's Missions
	Coordinator   Identity   // authorizes, offers and accepts results
	Workers       []Identity // one per worker
	// Metrics, when set, is the URL of the authority's /metrics
	// (authority serve --metrics-listen), which a soak reads.
	Metrics string
}

// Identity is a principal and its signing key.
type Identity struct {
	Actor protocol.Actor
	Key   protocol.PrivateKey
}

func (r *Remote) check(workers int) error {
	switch {
	case r.URL == "":
		return errors.New("a remote authority needs its URL")
	case r.AuthorityKeys == nil:
		return errors.New("a remote authority needs its public key: events are read only once verified")
	case r.Owner.Actor.Kind != protocol.ActorHuman:
		return fmt.Errorf("the owner must be a human, not %s %s", r.Owner.Actor.Kind, r.Owner.Actor.ID)
	case r.Coordinator.Actor.Kind != protocol.ActorAgent:
		return fmt.Errorf("the coordinator must be an agent, not %s %s", r.Coordinator.Actor.Kind, r.Coordinator.Actor.ID)
	case len(r.Workers) != workers:
		return fmt.Errorf("--workers %d with %d worker keys: give one key per worker", workers, len(r.Workers))
	}
	seen := map[string]bool{r.Coordinator.Actor.ID: true}
	for _, w := range r.Workers {
		if w.Actor.Kind != protocol.ActorAgent {
			return fmt.Errorf("a worker must be an agent, not %s %s", w.Actor.Kind, w.Actor.ID)
		}
		if seen[w.Actor.ID] {
			return fmt.Errorf("agent %s given twice: the coordinator and each worker need identities of their own", w.Actor.ID)
		}
		seen[w.Actor.ID] = true
	}
	return nil
}

// remoteAuthority is a running authority reached over its HTTPS routes
// (package remote) by the owner and the coordinator, and over wss by the
// workers. It keeps no store of this process: what a run writes here is
// the workers' stores only.
type remoteAuthority struct {
	cfg   Remote
	owner *remote.Authority
	coord *remote.Authority
	run   string // this run's part of its Group and Mission ids

	mu sync.Mutex
	// epochs are the coordinator's membership and coordinator epochs per
	// Group, learned from the Group's log once it is open.
	epochs map[string][2]uint64
	// sent counts the coordinator's commands by type and result.
	sent    map[string]float64
	workers []*prometheus.Registry    // one per worker: theirs share metric names
	last    map[string]*atomic.Uint64 // each Group's last sequence followed
	// waits and waited are the RATE_LIMITED answers waited out.
	waits  atomic.Int64
	waited atomic.Int64 // nanoseconds
}

func dialRemote(ctx context.Context, cfg Remote) (*remoteAuthority, error) {
	a := &remoteAuthority{cfg: cfg, epochs: map[string][2]uint64{}, sent: map[string]float64{}, last: map[string]*atomic.Uint64{}}
	dial := func(who Identity) (*remote.Authority, error) {
		return remote.Dial(ctx, remote.Config{URL: cfg.URL, Trust: cfg.Trust, AllowInsecureLoopback: cfg.AllowInsecureLoopback,
			Actor: who.Actor, Key: who.Key, AuthorityKeys: cfg.AuthorityKeys,
			RateLimited: func(d time.Duration) { a.waits.Add(1); a.waited.Add(int64(d)) }})
	}
	var err error
	if a.owner, err = dial(cfg.Owner); err != nil {
		return nil, fmt.Errorf("as owner %s: %w", cfg.Owner.Actor.ID, err)
	}
	if a.coord, err = dial(cfg.Coordinator); err != nil {
		return nil, fmt.Errorf("as coordinator %s: %w", cfg.Coordinator.Actor.ID, err)
	}
	if _, err := a.coord.OpenSession(ctx); err != nil {
		return nil, fmt.Errorf("coordinator %s: open session: %w", cfg.Coordinator.Actor.ID, err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	a.run = hex.EncodeToString(b[:])
	return a, nil
}

func (a *remoteAuthority) limited() (int, time.Duration) {
	return int(a.waits.Load()), time.Duration(a.waited.Load())
}

// groupID names the run's own Groups: an authority keeps every Group, so
// each run opens new ones.
func (a *remoteAuthority) groupID(n int) string {
	id := fmt.Sprintf("grp-bench-%s-%d", a.run, n+1)
	a.mu.Lock()
	a.last[id] = new(atomic.Uint64)
	a.mu.Unlock()
	return id
}

// lastOf is Group g's last sequence followed.
func (a *remoteAuthority) lastOf(g string) *atomic.Uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.last[g]; l != nil {
		return l
	}
	return new(atomic.Uint64)
}

// finish has the coordinator submit Group g's Mission and the owner
// approve it.
func (a *remoteAuthority) finish(ctx context.Context, g string) error {
	if err := a.coordinate(ctx, protocol.CmdMissionSubmitForApproval, g, submission(g, a.cfg.Coordinator.Actor)); err != nil {
		return fmt.Errorf("submit %s for approval: %w", missionOf(g), err)
	}
	// The creator is the Group's first member, at membership epoch 1.
	if err := a.asOwner(ctx, g, protocol.CmdMissionApprove, protocol.Envelope{MembershipEpoch: protocol.Uint64(1)}, approval(g)); err != nil {
		return fmt.Errorf("approve %s: %w", missionOf(g), err)
	}
	return nil
}

func (a *remoteAuthority) forget(g string) {
	a.mu.Lock()
	delete(a.epochs, g)
	delete(a.last, g)
	a.mu.Unlock()
}

// head is not known without a request: a soak settles on the workers'
// own state instead.
func (a *remoteAuthority) head(string) (uint64, bool) { return 0, false }

// usage reads the authority's /metrics when given (Remote.Metrics);
// its stores are on another host.
func (a *remoteAuthority) usage(ctx context.Context) (AuthorityUsage, error) {
	if a.cfg.Metrics == "" {
		return AuthorityUsage{Source: "none"}, nil
	}
	return metricsUsage(ctx, http.DefaultClient, a.cfg.Metrics)
}

// asOwner sends one command as the owner.
func (a *remoteAuthority) asOwner(ctx context.Context, g string, typ protocol.CommandType, env protocol.Envelope, payload any) error {
	env.GroupID, env.CorrelationID = g, missionOf(g)
	_, raw, err := protocol.BuildCommand(a.cfg.Owner.Actor, a.cfg.Owner.Key, typ, env, payload, time.Now())
	if err == nil {
		_, err = a.owner.Submit(ctx, raw)
	}
	return err
}

func (a *remoteAuthority) name() string { return a.cfg.URL }

func (a *remoteAuthority) close() error { return nil }

func (a *remoteAuthority) connect(wc *runtime.WorkerConfig) {
	wc.URL, wc.Trust, wc.AllowInsecureLoopback = a.cfg.URL, a.cfg.Trust, a.cfg.AllowInsecureLoopback
	wc.AuthorityKeys = a.cfg.AuthorityKeys
}

// watch counts the workers' commands from their metrics: the authority's
// own are not this process's to read.
func (a *remoteAuthority) watch(ws []*runtime.Worker) {
	for _, w := range ws {
		reg := prometheus.NewRegistry()
		for _, c := range w.Collectors() {
			reg.MustRegister(c)
		}
		a.workers = append(a.workers, reg)
	}
}

func (a *remoteAuthority) registered(ctx context.Context, agentID string) error {
	// Enrolled before the run or not at all: no use waiting.
	if _, err := a.coord.AgentCard(ctx, agentID); err != nil {
		return final{fmt.Errorf("worker %s is not known to the authority (enroll it first: docs/operations.md, \"Adding an agent\"): %w", agentID, err)}
	}
	return nil
}

func (a *remoteAuthority) open(ctx context.Context, g string, workers []string) error {
	mission := missionOf(g)
	owner := func(typ protocol.CommandType, env protocol.Envelope, payload any) error {
		return a.asOwner(ctx, g, typ, env, payload)
	}
	if err := owner(protocol.CmdMissionCreate, protocol.Envelope{}, createMission(g)); err != nil {
		return fmt.Errorf("create %s: %w", mission, err)
	}
	// The creator is the Group's first member, at membership epoch 1.
	if err := owner(protocol.CmdMissionAssignCoordinator, protocol.Envelope{MembershipEpoch: protocol.Uint64(1)},
		assignCoordinator(g, a.cfg.Coordinator.Actor.ID)); err != nil {
		return fmt.Errorf("assign coordinator of %s: %w", mission, err)
	}
	if err := a.learnEpochs(ctx, g); err != nil {
		return err
	}
	for _, id := range workers {
		if err := a.coordinate(ctx, protocol.CmdMembershipChange, g, addWorker(id)); err != nil {
			return fmt.Errorf("add %s to %s: %w", id, g, err)
		}
	}
	if err := a.learnEpochs(ctx, g); err != nil {
		return err
	}
	return nil
}

// learnEpochs folds Group g's log so far for the coordinator's epochs,
// and starts following it from its head.
func (a *remoteAuthority) learnEpochs(ctx context.Context, g string) error {
	evs, err := a.coord.Events(ctx, g, 0, 0)
	if err != nil {
		return fmt.Errorf("read %s: %w", g, err)
	}
	me := a.cfg.Coordinator.Actor
	var membership, coordinator uint64
	for _, se := range evs {
		ev, err := decodeLogEvent(se)
		if err != nil {
			return err
		}
		a.lastOf(g).Store(se.Sequence)
		if _, known := group.Events[ev.Type]; !known {
			continue
		}
		fe, err := group.FromWire(ev)
		if err != nil {
			return fmt.Errorf("%s event %d: %w", g, se.Sequence, err)
		}
		switch p := fe.Payload.(type) {
		case *protocol.Membership:
			if p.Principal == me {
				membership = p.MembershipEpoch
			}
		case *group.CoordinatorAssigned:
			if p.Coordinator != nil && p.Coordinator.AgentID == me.ID {
				coordinator = p.Coordinator.CoordinatorEpoch
			}
		}
	}
	if membership == 0 || coordinator == 0 {
		return fmt.Errorf("%s: the log does not make %s its coordinator (membership epoch %d, coordinator epoch %d)", g, me.ID, membership, coordinator)
	}
	a.mu.Lock()
	a.epochs[g] = [2]uint64{membership, coordinator}
	a.mu.Unlock()
	return nil
}

func (a *remoteAuthority) coordinate(ctx context.Context, typ protocol.CommandType, g string, payload any) error {
	a.mu.Lock()
	ep := a.epochs[g]
	a.mu.Unlock()
	env := protocol.Envelope{GroupID: g, CorrelationID: missionOf(g), SessionEpoch: protocol.Uint64(a.coord.SessionEpoch()),
		MembershipEpoch: protocol.Uint64(ep[0])}
	if protocol.CarriesCoordinatorEpoch(typ) {
		env.CoordinatorEpoch = protocol.Uint64(ep[1])
	}
	_, raw, err := protocol.BuildCommand(a.cfg.Coordinator.Actor, a.cfg.Coordinator.Key, typ, env, payload, time.Now())
	if err != nil {
		return err
	}
	_, err = a.coord.Submit(ctx, raw)
	a.mu.Lock()
	a.sent[protocol.MetricLabel(typ)+" "+protocol.MetricResult(err)]++
	a.mu.Unlock()
	return err
}

// follow long-polls Group g's log as the owner, so that the
// coordinator's own limits are its commands'; every event is verified (by
// package remote) before it is noted.
func (a *remoteAuthority) follow(ctx context.Context, g string, note noteFunc) error {
	last := a.lastOf(g)
	after := last.Load()
	for {
		evs, err := a.owner.Events(ctx, g, after, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read %s: %w", g, err)
		}
		at := time.Now()
		for _, se := range evs {
			// Verified already; only what the tracker reads is decoded.
			var ev struct {
				Type      protocol.EventType  `json:"type"`
				Aggregate *protocol.Aggregate `json:"aggregate"`
			}
			if err := json.Unmarshal(se.Raw, &ev); err != nil {
				return fmt.Errorf("%s event %d: %w", g, se.Sequence, err)
			}
			// Counted before it is noted: the note of an item's last
			// event may end the run, and the counters read then must
			// hold that event.
			after = se.Sequence
			last.Store(after)
			if ev.Aggregate != nil && ev.Aggregate.Kind == protocol.AggregateWorkItem {
				note(ev.Aggregate.ID, ev.Type, at, len(se.Raw))
			}
		}
		if err := a.owner.Wait(ctx, g, after); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait on %s: %w", g, err)
		}
	}
}

func (a *remoteAuthority) counts(groups []string) (map[string]float64, map[string]uint64, error) {
	if err := a.settle(); err != nil {
		return nil, nil, err
	}
	commands := map[string]float64{}
	for _, reg := range a.workers {
		c, err := commandCounts(reg, "mwp_worker_commands_total")
		if err != nil {
			return nil, nil, err
		}
		for k, v := range c {
			commands[k] += v
		}
	}
	a.mu.Lock()
	for k, v := range a.sent {
		commands[k] += v
	}
	a.mu.Unlock()
	seqs := map[string]uint64{}
	for _, g := range groups {
		seqs[g] = a.lastOf(g).Load()
	}
	return commands, seqs, nil
}

func (a *remoteAuthority) files() []string { return nil }

// settleBound is how long settle waits: a command's answer is a round trip
// away, or a lost connection's error is.
const settleBound = 10 * time.Second

// settle waits until no worker has a command awaiting its answer. A worker
// counts a command when its answer arrives, and that can come after the
// event that ended the run (the authority sends both at once).
func (a *remoteAuthority) settle() error {
	deadline := time.Now().Add(settleBound)
	for {
		var n float64
		for _, reg := range a.workers {
			v, err := gaugeValue(reg, "mwp_worker_commands_awaiting_answer")
			if err != nil {
				return err
			}
			n += v
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workers' commands still awaiting an answer after %s: %v", settleBound, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func decodeLogEvent(se protocol.LogEvent) (*protocol.Event, error) {
	var ev protocol.Event
	if err := json.Unmarshal(se.Raw, &ev); err != nil {
		return nil, fmt.Errorf("event %d: %w", se.Sequence, err)
	}
	return &ev, nil
}
