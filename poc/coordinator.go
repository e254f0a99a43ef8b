package poc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/protocol"
)

// CoordinatorConfig sets up one Mission's coordinator agent.
type CoordinatorConfig struct {
	Service *authoritylite.Service
	AgentID string
	Key     protocol.PrivateKey
	Mission MissionSpec
	// Workers are the candidate worker agents; their registered Agent
	// Cards say what they can do.
	Workers []string
	// LeaseDuration is the coordinator lease the owner grants; the
	// coordinator renews when less than half of it is left.
	LeaseDuration time.Duration
	// OfferTTL is how long an offer stands (default one minute).
	OfferTTL time.Duration
	// MaxCandidates bounds an urgent offer's candidate set (default 3).
	MaxCandidates int
	// Project is the baseline the reviewer applies patches to; nil is
	// TinyProject().
	Project Tree
	// RequireProvenance makes review check that every output manifest
	// lists the item's contract inputs among its sourceArtifacts (spec
	// 13.1 provenance); the worker's host fills them.
	RequireProvenance bool
	// OnReview, when set, sees every review as it is decided.
	OnReview func(ReviewRecord)
	Logger   *slog.Logger
}

// ReviewRecord is the review of one submission (coordinator.Review).
type ReviewRecord = coordinator.Review

// The review steps, in order (spec 13.2).
const (
	ReviewIntegrity     = coordinator.StepIntegrity
	ReviewDeterministic = coordinator.StepChecks
	ReviewSemantic      = coordinator.StepSemantic
)

// Coordinator is a Mission's in-process coordinator agent: package
// coordinator driving the Mission's plan (MissionSpec.Plan) with the PoC's
// review rules (Rules), its feature request as an input and ReworkStages
// for change requests, through embed.Actor. It adds Stop and the record of
// reviews the fault suite reads.
type Coordinator struct {
	cfg CoordinatorConfig
	c   *coordinator.Coordinator

	mu      sync.Mutex
	reviews []ReviewRecord
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{} // closed when Run returns
	running bool
}

// ErrStopped is returned by Run after Stop.
var ErrStopped = errors.New("poc: coordinator stopped")

// NewCoordinator returns a coordinator; Run starts it.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Service == nil || cfg.Mission.GroupID == "" {
		return nil, errors.New("poc: a coordinator needs a service and a mission")
	}
	out := &Coordinator{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	c, err := coordinator.New(coordinator.Config{
		Authority: embed.NewActor(cfg.Service, protocol.Actor{Kind: protocol.ActorAgent, ID: cfg.AgentID}),
		AgentID:   cfg.AgentID, Key: cfg.Key, Plan: cfg.Mission.Plan(), Workers: cfg.Workers,
		LeaseDuration: cfg.LeaseDuration, OfferTTL: cfg.OfferTTL, MaxCandidates: cfg.MaxCandidates,
		Clock: serviceClock{cfg.Service}, Logger: cfg.Logger, OnReview: out.onReview,
		Rules: Rules{Mission: cfg.Mission, Project: cfg.Project}, RequireProvenance: cfg.RequireProvenance,
		Inputs: cfg.Mission.Inputs(), Rework: cfg.Mission.Rework,
	})
	if err != nil {
		return nil, err
	}
	out.c = c
	return out, nil
}

func (c *Coordinator) onReview(rec ReviewRecord) {
	c.mu.Lock()
	c.reviews = append(c.reviews, rec)
	fn := c.cfg.OnReview
	c.mu.Unlock()
	if fn != nil {
		fn(rec)
	}
}

// Run follows the Group log and acts until the Mission is approved,
// cancelled or terminated (nil), the coordinator is fenced by a newer
// epoch (AUTH_STALE_COORDINATOR), Stop (ErrStopped) or ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	defer close(c.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.c.Run(ctx)
	select {
	case <-c.stop:
		return ErrStopped
	default:
		return err
	}
}

// Stop makes Run return ErrStopped and waits for it, when it runs; the
// coordinator sends nothing more unless asked (Renew).
func (c *Coordinator) Stop() {
	c.stopped.Do(func() { close(c.stop) })
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	if running {
		<-c.done
	}
}

// Poke makes Run re-evaluate time-based decisions now (after a fake clock
// moved).
func (c *Coordinator) Poke() { c.c.Poke() }

// Epoch is the coordinator epoch this agent holds (0 before its
// assignment was seen).
func (c *Coordinator) Epoch() uint64 { return c.c.Epoch() }

// Reviews returns every review decided so far, in order.
func (c *Coordinator) Reviews() []ReviewRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ReviewRecord(nil), c.reviews...)
}

// Renew sends mission.renew_coordinator on the epoch this agent held,
// after Stop. A replaced coordinator gets AUTH_STALE_COORDINATOR: its late
// commands are fenced.
func (c *Coordinator) Renew(ctx context.Context) error { return c.c.Renew(ctx) }

// serviceClock is the authority's time, so that decisions and commands
// agree with the authority's clock (a fake one in tests); waits use real
// timers, and a test that moves a fake clock pokes the coordinator.
type serviceClock struct{ s *authoritylite.Service }

func (c serviceClock) Now() time.Time { return c.s.Now() }
