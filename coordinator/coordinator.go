package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// Config sets up the coordinator of one plan's Mission.
type Config struct {
	Authority Authority
	// AgentID and Key are the coordinator agent's; its Agent Card is
	// registered and its session open before Run.
	AgentID string
	Key     protocol.PrivateKey
	Plan    *plan.Plan
	// Workers are the candidate worker agents; their registered Agent
	// Cards say what they can do.
	Workers []string
	// LeaseDuration is the coordinator lease it renews, at half-life
	// (default ten minutes).
	LeaseDuration time.Duration
	// OfferTTL is how long an offer stands (default one minute).
	OfferTTL time.Duration
	// CardRefresh is how often, at most, the workers' Agent Cards are
	// read again while an item waits with no eligible worker: a worker
	// that registers a new card is offered work without a restart
	// (default ten seconds).
	CardRefresh time.Duration
	// MaxCandidates bounds an urgent item's candidate set (default 3).
	MaxCandidates int
	// RunCheck runs one deterministic check (default ExecCheck with a
	// two-minute timeout and 1 MiB of output).
	RunCheck func(ctx context.Context, run CheckRun) (CheckResult, error)
	// Clock is the time (default the system clock); with clock.Timers the
	// waits use its timers too.
	Clock  clock.Clock
	Logger *slog.Logger
	// OnReview, when set, sees every review as it is decided.
	OnReview func(Review)
	// Rules, when set, add review rules written in Go to the plan's.
	Rules Rules
	// RequireProvenance makes the integrity step check that every
	// output's manifest lists the item's contract inputs among its
	// sourceArtifacts (spec 13.1 provenance).
	RequireProvenance bool
	// Inputs are artifacts the coordinator makes and publishes before a
	// stage that reads them is offered (by digest in the stage's inputs).
	Inputs []Input
	// Rework, when set, names the stages that answer each change request.
	Rework Rework
}

// Coordinator follows its Mission's Group log and drives the plan through
// signed commands on its coordinator lease (docs/design.md §3, §11).
type Coordinator struct {
	cfg     Config
	pol     policy
	v       *view
	workers []Worker
	// agentVersion is the coordinator's own Agent Card version, named as
	// the generator of its Context Packages.
	agentVersion string
	// blocked remembers an action refused at a log position, so it is not
	// retried until the log or the time moves.
	blocked map[string]uint64

	cardsAt time.Time // when the workers' cards were last read

	mu    sync.Mutex
	epoch uint64 // the coordinator epoch held, 0 before assignment
	stats Stats  // what Stats returns, refreshed by Run
	poke  chan struct{}
}

// New checks cfg and returns a coordinator; Run starts it.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Authority == nil || cfg.AgentID == "" || cfg.Key.KeyID == "" || cfg.Plan == nil {
		return nil, errors.New("coordinator: an authority, an agent id, a key and a plan are required")
	}
	if !protocol.KeyBelongsTo(cfg.Key.KeyID, protocol.ActorAgent, cfg.AgentID) {
		return nil, fmt.Errorf("coordinator: key %s is not agent %s's", cfg.Key.KeyID, cfg.AgentID)
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 10 * time.Minute
	}
	if cfg.OfferTTL <= 0 {
		cfg.OfferTTL = time.Minute
	}
	if cfg.MaxCandidates <= 0 {
		cfg.MaxCandidates = 3
	}
	if cfg.CardRefresh <= 0 {
		cfg.CardRefresh = 10 * time.Second
	}
	if cfg.RunCheck == nil {
		cfg.RunCheck = ExecCheck(2*time.Minute, 1<<20)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	inputs := map[string]Input{}
	for _, in := range cfg.Inputs {
		inputs[protocol.Digest(in.Data)] = in
	}
	return &Coordinator{cfg: cfg, v: newView(cfg.Plan.Mission.GroupID), blocked: map[string]uint64{}, poke: make(chan struct{}, 1),
		pol: policy{me: cfg.AgentID, leaseDuration: cfg.LeaseDuration, offerTTL: cfg.OfferTTL, maxCandidates: cfg.MaxCandidates, prechecked: map[string]uint64{},
			inputs: inputs, rework: cfg.Rework}}, nil
}

// Poke makes Run re-evaluate time-based decisions now (after a fake clock
// moved).
func (c *Coordinator) Poke() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Epoch is the coordinator epoch held (0 before the assignment was seen).
func (c *Coordinator) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// MissionState is the Mission's state in the log as Run last saw it (""
// before its creation). Read it after Run returned: Run's goroutine owns
// the view while it runs.
func (c *Coordinator) MissionState() protocol.MissionState { return c.v.missionState() }

// Run follows the Group log and acts until the Mission is approved,
// cancelled or terminated (nil), the coordinator is fenced by a newer
// assignment (AUTH_STALE_COORDINATOR) or by a newer session of its agent
// (AUTH_STALE_SESSION: another process opened one), a permanent error, or
// ctx ends. One agent may run any number of Coordinators, of different
// Missions, on one session at once.
// Before its assignment it waits for it. A transient failure (the
// authority busy, failing internally or unreachable: transient) is logged
// and retried after a back-off from 50 ms to 5 s: a long-running agent
// outlives an authority's restart.
func (c *Coordinator) Run(ctx context.Context) error {
	retry := time.Duration(0)
	for {
		done, err := c.round(ctx)
		c.setFailing(err)
		switch {
		case err == nil && done:
			return nil
		case err == nil:
			retry = 0
			continue
		case ctx.Err() != nil || !transient(err):
			return err
		}
		retry = min(max(2*retry, 50*time.Millisecond), 5*time.Second)
		c.cfg.Logger.Warn("the authority failed transiently; retrying", "err", err, "in", retry)
		t := newTimer(c.cfg.Clock, retry)
		select {
		case <-t.C():
		case <-c.poke:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
		t.Stop()
	}
}

// round catches up with the log, acts once or waits once; done: the
// Mission has ended.
func (c *Coordinator) round(ctx context.Context) (done bool, err error) {
	if c.workers == nil {
		if err := c.readCards(ctx); err != nil {
			return false, err
		}
		c.agentVersion = "unknown"
		if card, err := c.cfg.Authority.AgentCard(ctx, c.cfg.AgentID); err == nil && card.AgentVersion != "" {
			c.agentVersion = card.AgentVersion
		}
	}
	if c.v.g.Mission == nil {
		// Before mission.create the Group has no log to wait on.
		if err := c.waitCreated(ctx); err != nil {
			return false, err
		}
	}
	if err := c.catchUp(ctx); err != nil {
		return false, err
	}
	if m := c.v.missionState(); m == protocol.MissionApproved || m == protocol.MissionCancelled || m == protocol.MissionTerminated {
		return true, nil
	}
	if err := c.fenced(); err != nil {
		return false, err
	}
	now := c.cfg.Clock.Now()
	if !now.Before(c.cardsAt.Add(c.cfg.CardRefresh)) && starved(c.v, c.cfg.Plan, c.workers, now, c.pol) {
		if err := c.readCards(ctx); err != nil {
			return false, err
		}
	}
	acted, err := c.step(ctx, now)
	if err != nil || acted {
		return false, err
	}
	return false, c.wait(ctx, c.cfg.Plan.Mission.GroupID, now)
}

// transient reports whether err may pass by itself: a retryable protocol
// error (BACKPRESSURE, RATE_LIMITED, INTERNAL_ERROR) or a failure to reach
// the authority at all.
func transient(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code.Retryable()
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// wait blocks until the log grows, the next deadline passes, a poke or
// ctx ends; no polling.
func (c *Coordinator) wait(ctx context.Context, group string, now time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan error, 1)
	// The position is read here: the goroutine may outlive this call (a
	// deadline or a poke returns first) while Run folds the view on.
	after := c.v.lastSeq
	go func() { changed <- c.cfg.Authority.Wait(ctx, group, after) }()
	var timer <-chan time.Time
	next := nextDeadline(c.v, now, c.cfg.LeaseDuration)
	if refresh := c.cardsAt.Add(c.cfg.CardRefresh); starved(c.v, c.cfg.Plan, c.workers, now, c.pol) && (next.IsZero() || refresh.Before(next)) {
		next = refresh
	}
	if !next.IsZero() {
		t := newTimer(c.cfg.Clock, next.Sub(now))
		defer t.Stop()
		timer = t.C()
	}
	select {
	case err := <-changed:
		if err != nil && ctx.Err() == nil {
			return err
		}
	case <-timer:
		clear(c.blocked)
	case <-c.poke:
		clear(c.blocked)
	case <-ctx.Done():
	}
	return context.Cause(ctx)
}

// readCards reads the candidate workers' registered Agent Cards.
func (c *Coordinator) readCards(ctx context.Context) error {
	workers := make([]Worker, 0, len(c.cfg.Workers))
	for _, id := range c.cfg.Workers {
		card, err := c.cfg.Authority.AgentCard(ctx, id)
		if err != nil {
			return fmt.Errorf("coordinator: worker %s: %w", id, err)
		}
		workers = append(workers, Worker{AgentID: id, Capabilities: card.Capabilities})
	}
	c.workers, c.cardsAt = workers, c.cfg.Clock.Now()
	return nil
}

// waitCreated waits for the Mission's Group to have events, retrying
// with a backoff from 10 ms to 1 s: an authority cannot signal a Group it
// does not have yet.
func (c *Coordinator) waitCreated(ctx context.Context) error {
	for d := 10 * time.Millisecond; ; d = min(2*d, time.Second) {
		if err := c.catchUp(ctx); err != nil || c.v.g.Mission != nil {
			return err
		}
		t := newTimer(c.cfg.Clock, d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// catchUp folds every new event (verified by the Authority) into the view.
func (c *Coordinator) catchUp(ctx context.Context) error {
	evs, err := c.cfg.Authority.Events(ctx, c.cfg.Plan.Mission.GroupID, c.v.lastSeq, 0)
	if err != nil {
		var restored bool
		if restored, err = c.restoreFrom(ctx, err); restored {
			evs, err = c.cfg.Authority.Events(ctx, c.cfg.Plan.Mission.GroupID, c.v.lastSeq, 0)
		}
	}
	if err != nil {
		if protocol.CodeOf(err) == protocol.CodeGroupNotFound && c.v.lastSeq == 0 {
			return nil // the Mission is not created yet
		}
		return err
	}
	for _, se := range evs {
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %d: %v", se.Sequence, err)
		}
		if err := c.v.apply(&ev); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if lease := c.v.coordinator(); lease != nil && lease.AgentID == c.cfg.AgentID {
		c.epoch = lease.CoordinatorEpoch
	} else if e := c.v.assigned[c.cfg.AgentID]; e > c.epoch {
		c.epoch = e // held once and replaced since: fenced below
	}
	c.logStatsLocked()
	c.mu.Unlock()
	return nil
}

// fenced is AUTH_STALE_COORDINATOR once the log names another
// coordinator after this one held the lease.
func (c *Coordinator) fenced() error {
	e, lease := c.Epoch(), c.v.coordinator()
	if e != 0 && lease != nil && (lease.CoordinatorEpoch != e || lease.AgentID != c.cfg.AgentID) {
		return protocol.Errorf(protocol.CodeAuthStaleCoordinator, "coordinator %s (epoch %d) was replaced by %s (epoch %d)", c.cfg.AgentID, e, lease.AgentID, lease.CoordinatorEpoch)
	}
	return nil
}

// step carries out the first decided action not refused at this log
// position; it reports whether it sent a command.
func (c *Coordinator) step(ctx context.Context, now time.Time) (bool, error) {
	for _, a := range decide(c.v, c.cfg.Plan, c.workers, now, c.pol) {
		if seq, ok := c.blocked[a.key()]; ok && seq == c.v.lastSeq {
			continue
		}
		sent, err := c.execute(ctx, a, now)
		if err == nil {
			if sent {
				return true, nil
			}
			continue
		}
		switch code := protocol.CodeOf(err); {
		case code == protocol.CodeAuthStaleCoordinator || code == protocol.CodeAuthStaleSession:
			return false, err // fenced for good: a newer assignment or session of this agent
		case ctx.Err() != nil:
			return false, ctx.Err()
		case transient(err):
			return false, err // Run backs off and decides again
		default:
			c.cfg.Logger.Warn("coordinator action refused", "action", a.kind, "item", a.item, "err", err)
			c.blocked[a.key()] = c.v.lastSeq
		}
	}
	return false, nil
}

// Card is the Agent Card a coordinator agent registers: the coordinator
// role, the capability mission.coordinate, and the least maxConcurrency
// (its declared execution slots: it runs no WorkItem itself). The agent
// coordinates any number of Missions; the card does not bound them.
func Card(agentID string) protocol.AgentCard {
	return protocol.AgentCard{AgentID: agentID, AgentVersion: "0.1.0", OrganizationID: "org-1", DisplayName: agentID, MaxConcurrency: 1,
		Capabilities: protocol.List[protocol.Capability]{{ID: "mission.coordinate", Version: "0.1.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleCoordinator}}
}
