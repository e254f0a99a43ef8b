package poc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
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
	// MaxCandidates bounds an offer's candidate set (default 3).
	MaxCandidates int
	// Project is the baseline the reviewer applies patches to; nil is
	// TinyProject().
	Project Tree
	// RequireProvenance makes review check that every output manifest
	// lists the item's contract inputs among its sourceArtifacts (spec
	// 13.1 provenance). The handlers cannot set them (slots.Host builds
	// the manifest), so it is on only when the worker's host fills them.
	RequireProvenance bool
	// OnReview, when set, sees every review as it is decided.
	OnReview func(ReviewRecord)
	Logger   *slog.Logger
}

// Coordinator is an in-process coordinator agent (docs/design.md §3, §11): it
// follows its Group's log and drives the Mission graph through signed
// commands on its coordinator lease.
type Coordinator struct {
	cfg     CoordinatorConfig
	p       *authoritylite.Principal
	v       *view
	workers []WorkerInfo
	inputs  map[string][]byte
	// blocked remembers an action refused at a log position, so it is not
	// retried until the log or the time moves.
	blocked map[string]uint64

	mu    sync.Mutex
	epoch uint64 // the coordinator epoch this agent holds, 0 before assignment
	// seen is the view's last sequence for commands sent from other
	// goroutines (Renew): only Run's goroutine touches the view.
	seen    uint64
	reviews []ReviewRecord
	poke    chan struct{}
	stop    chan struct{}
	stopped sync.Once
}

// ErrStopped is returned by Run after Stop.
var ErrStopped = errors.New("poc: coordinator stopped")

// NewCoordinator returns a coordinator; Run starts it.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Service == nil || cfg.AgentID == "" || cfg.Key.KeyID == "" || cfg.Mission.GroupID == "" {
		return nil, errors.New("poc: a coordinator needs a service, an agent id, a key and a mission")
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
	if cfg.Project == nil {
		cfg.Project = TinyProject()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	feature := FeatureRequest(cfg.Mission.Feature)
	return &Coordinator{
		cfg: cfg, p: cfg.Service.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: cfg.AgentID}, cfg.Key),
		v: newView(cfg.Mission.GroupID), inputs: map[string][]byte{protocol.Digest(feature): feature},
		blocked: map[string]uint64{}, poke: make(chan struct{}, 1), stop: make(chan struct{}),
	}, nil
}

// Stop makes Run return ErrStopped; the coordinator sends nothing more
// unless asked (Renew).
func (c *Coordinator) Stop() { c.stopped.Do(func() { close(c.stop) }) }

// Poke makes Run re-evaluate time-based decisions now (after a fake clock
// moved); a real clock needs no poke.
func (c *Coordinator) Poke() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Epoch is the coordinator epoch this agent holds (0 before its
// assignment was seen).
func (c *Coordinator) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// Reviews returns every review decided so far, in order.
func (c *Coordinator) Reviews() []ReviewRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ReviewRecord(nil), c.reviews...)
}

// Run follows the Group log and acts until the Mission is approved,
// cancelled or terminated (nil), the coordinator is fenced by a newer
// epoch (AUTH_STALE_COORDINATOR), Stop (ErrStopped) or ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	if err := c.loadWorkers(); err != nil {
		return err
	}
	for _, b := range c.inputs {
		if _, err := c.cfg.Service.PutArtifact(b); err != nil {
			return fmt.Errorf("poc: coordinator: store input: %w", err)
		}
	}
	group := c.cfg.Mission.GroupID
	for {
		select {
		case <-c.stop:
			return ErrStopped
		default:
		}
		if err := c.catchUp(); err != nil {
			return err
		}
		if c.v.missionState.Terminal() {
			return nil
		}
		if err := c.fenced(); err != nil {
			return err
		}
		now := c.cfg.Service.Now()
		acted, err := c.step(ctx, now)
		if err != nil {
			return err
		}
		if acted {
			continue
		}
		if err := c.wait(ctx, group, now); err != nil {
			return err
		}
	}
}

// wait blocks until the log grows, the next deadline passes, a poke, Stop
// or ctx; no polling.
func (c *Coordinator) wait(ctx context.Context, group string, now time.Time) error {
	changed := c.cfg.Service.Changed(group, c.v.lastSeq)
	var timer <-chan time.Time
	if next := c.v.nextDeadline(now, c.renewAt()); !next.IsZero() {
		t := time.NewTimer(next.Sub(now))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-changed:
	case <-timer:
		clear(c.blocked)
	case <-c.poke:
		clear(c.blocked)
	case <-c.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// catchUp folds every new, authority-signed event into the view.
func (c *Coordinator) catchUp() error {
	evs, err := c.cfg.Service.Events(c.cfg.Mission.GroupID, c.v.lastSeq, 0)
	if err != nil {
		return err
	}
	keys := protocol.NewKeySet(c.cfg.Service.PublicKey())
	for _, se := range evs {
		doc, err := protocol.Parse(se.Raw, protocol.DecodeOptions{})
		if err != nil {
			return err
		}
		if err := protocol.Verify(doc.(map[string]any), keys); err != nil {
			return fmt.Errorf("poc: coordinator: event %d: %w", se.Sequence, err)
		}
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			return err
		}
		if err := c.v.apply(&ev); err != nil {
			return err
		}
		c.mu.Lock()
		c.seen = c.v.lastSeq
		c.mu.Unlock()
		switch {
		case ev.Type == protocol.EvtMissionCoordinatorAssigned && c.v.coordAgent == c.cfg.AgentID:
			c.mu.Lock()
			c.epoch = c.v.coordEpoch
			c.mu.Unlock()
		case ev.Type == protocol.EvtMissionChangesRequested:
			cr := changeRequestBytes(c.v.changeRequests[len(c.v.changeRequests)-1])
			c.inputs[protocol.Digest(cr)] = cr
		}
	}
	return nil
}

// fenced reports AUTH_STALE_COORDINATOR once the log shows a newer
// coordinator epoch than the one this agent holds.
func (c *Coordinator) fenced() error {
	e := c.Epoch()
	if e != 0 && (c.v.coordEpoch != e || c.v.coordAgent != c.cfg.AgentID) {
		return protocol.Errorf(protocol.CodeAuthStaleCoordinator, "coordinator %s (epoch %d) was replaced by %s (epoch %d)", c.cfg.AgentID, e, c.v.coordAgent, c.v.coordEpoch)
	}
	if e == 0 {
		return protocol.Errorf(protocol.CodeAuthForbidden, "%s is not the coordinator of %s", c.cfg.AgentID, c.cfg.Mission.MissionID)
	}
	return nil
}

func (c *Coordinator) renewAt() time.Time {
	return c.v.coordExpires.Add(-c.cfg.LeaseDuration / 2)
}

// step carries out the first decided action not refused at this log
// position; it reports whether it acted.
func (c *Coordinator) step(ctx context.Context, now time.Time) (bool, error) {
	cfg := decideConfig{me: c.cfg.AgentID, renewBefore: c.cfg.LeaseDuration / 2, inputs: c.inputs}
	for _, a := range decide(c.v, c.cfg.Mission, c.workers, now, cfg) {
		if seq, ok := c.blocked[a.key()]; ok && seq == c.v.lastSeq {
			continue
		}
		err := c.execute(ctx, a, now)
		if err == nil {
			return true, nil
		}
		switch code := protocol.CodeOf(err); {
		case code == protocol.CodeAuthStaleCoordinator:
			return false, err
		case ctx.Err() != nil:
			return false, ctx.Err()
		default:
			c.cfg.Logger.Warn("coordinator action refused", "action", a.kind, "item", a.item, "err", err)
			c.blocked[a.key()] = c.v.lastSeq
		}
	}
	return false, nil
}

// do sends one command on this agent's coordinator epoch with an action id
// derived from the log position, so a replayed decision is idempotent.
func (c *Coordinator) do(ctx context.Context, typ protocol.CommandType, a action, payload any) error {
	c.mu.Lock()
	epoch, seen := c.epoch, c.seen
	c.mu.Unlock()
	_, err := c.p.Do(ctx, typ, c.cfg.Mission.GroupID, payload, func(e *protocol.Envelope) {
		e.ActionID = fmt.Sprintf("act-%s-%d-%s-%s", c.cfg.AgentID, seen, a.kind, a.item)
		e.CorrelationID = c.cfg.Mission.MissionID
		if e.CoordinatorEpoch != nil || protocol.CarriesCoordinatorEpoch(typ) {
			e.CoordinatorEpoch = protocol.Uint64(epoch)
		}
	})
	return err
}

func (c *Coordinator) execute(ctx context.Context, a action, now time.Time) error {
	m := c.cfg.Mission
	switch a.kind {
	case actRenew:
		return c.do(ctx, protocol.CmdMissionRenewCoordinator, a, &protocol.RenewCoordinatorPayload{MissionID: m.MissionID, LeaseDurationMs: uint64(c.cfg.LeaseDuration.Milliseconds())})
	case actMember:
		return c.do(ctx, protocol.CmdMembershipChange, a, &protocol.ChangeMembershipPayload{
			Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: a.item}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	case actAuthorize:
		return c.do(ctx, protocol.CmdWorkAuthorize, a, &protocol.AuthorizeWorkPayload{WorkItemID: a.item, MissionID: m.MissionID, Contract: a.stage.Contract})
	case actPublish:
		return c.publishInput(ctx, a, now)
	case actOffer:
		w := c.v.items[a.item]
		return c.do(ctx, protocol.CmdWorkOffer, a, offerPayload(c.v, w, a.stage, c.workers, now, c.cfg.OfferTTL, c.cfg.MaxCandidates))
	case actReview:
		return c.review(ctx, a, now)
	case actApproval:
		return c.do(ctx, protocol.CmdMissionSubmitForApproval, a, approvalPayload(c.v, m))
	}
	return fmt.Errorf("poc: unknown action %s", a.kind)
}

// review runs the 13.2 review of a submission and accepts or fails it.
func (c *Coordinator) review(ctx context.Context, a action, now time.Time) error {
	w := c.v.items[a.item]
	rec := review(reviewInput{item: w, stage: a.stage, manifests: c.v.manifests, project: c.cfg.Project,
		provenance: c.cfg.RequireProvenance,
		fetch:      func(d string) ([]byte, error) { return FetchVerified(c.cfg.Service, d) }})
	c.mu.Lock()
	c.reviews = append(c.reviews, rec)
	c.mu.Unlock()
	if c.cfg.OnReview != nil {
		c.cfg.OnReview(rec)
	}
	if rec.Accepted {
		return c.do(ctx, protocol.CmdWorkAcceptResult, a, &protocol.AcceptResultPayload{WorkItemID: a.item, ContractRevision: w.contract.Revision,
			ReviewEvidence: reviewEvidence(rec, w.contract, c.cfg.AgentID, now, w.submission.artifacts), Comment: "accepted after the spec 13.2 review"})
	}
	ev, reason := failureEvidence(rec, c.cfg.AgentID, now, w.submission.artifacts)
	return c.do(ctx, protocol.CmdWorkFail, a, &protocol.FailWorkPayload{WorkItemID: a.item, Reason: reason, Evidence: ev})
}

// publishInput stores an input the coordinator made (the feature request,
// a change request) and publishes its signed manifest under the first item
// that uses it.
func (c *Coordinator) publishInput(ctx context.Context, a action, now time.Time) error {
	data := c.inputs[a.digest]
	if _, err := c.cfg.Service.PutArtifact(data); err != nil {
		return err
	}
	m, err := SignManifest(c.cfg.Service, c.cfg.Key, c.cfg.AgentID, ManifestFields{MediaType: MediaJSON, MissionID: c.cfg.Mission.MissionID,
		GroupID: c.cfg.Mission.GroupID, WorkItemID: a.item, Data: data, At: now})
	if err != nil {
		return err
	}
	_, err = c.p.Do(ctx, protocol.CmdArtifactPublish, c.cfg.Mission.GroupID, &protocol.PublishArtifactPayload{Manifest: m}, func(e *protocol.Envelope) {
		e.ActionID = fmt.Sprintf("act-%s-%d-%s-%s", c.cfg.AgentID, c.v.lastSeq, a.kind, a.item)
		e.CorrelationID = c.cfg.Mission.MissionID
	})
	return err
}

// Renew sends mission.renew_coordinator on the epoch this agent holds. A
// replaced coordinator gets AUTH_STALE_COORDINATOR: its late commands are
// fenced.
func (c *Coordinator) Renew(ctx context.Context) error {
	return c.do(ctx, protocol.CmdMissionRenewCoordinator, action{kind: actRenew, item: "late"},
		&protocol.RenewCoordinatorPayload{MissionID: c.cfg.Mission.MissionID, LeaseDurationMs: uint64(c.cfg.LeaseDuration.Milliseconds())})
}

// loadWorkers reads the candidate workers' registered Agent Cards.
func (c *Coordinator) loadWorkers() error {
	c.workers = c.workers[:0]
	for _, id := range c.cfg.Workers {
		card, ok := c.cfg.Service.AgentCard(id)
		if !ok {
			return protocol.Errorf(protocol.CodeAuthForbidden, "poc: worker %s has no registered Agent Card", id)
		}
		c.workers = append(c.workers, WorkerInfo{AgentID: id, Capabilities: card.Capabilities})
	}
	return nil
}
