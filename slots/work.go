package slots

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// Work is the handle a handler gets for one attempt. It exposes only its
// own slot's data; everything it returns is a copy. It is safe for
// concurrent use by the handler's goroutines.
type Work struct {
	r       *run
	attempt uint64
	resume  *checkpoint.Checkpoint
	done    bool // guarded by r.mu: the attempt returned
}

// Slot names this execution.
func (w *Work) Slot() Slot { return w.r.slot }

// Agent is the actor the worker runs as: the producer a handler names in
// its Evidence.
func (w *Work) Agent() protocol.Actor {
	return protocol.Actor{Kind: protocol.ActorAgent, ID: w.r.pool.cfg.AgentID}
}

// Logger writes the handler's own lines into the worker's log, in its
// format (--log-format) and at its level, with the run's ids: group,
// mission, item, lease, ownership epoch, attempt and capability.
func (w *Work) Logger() *slog.Logger {
	s := w.r.slot
	return w.r.pool.cfg.Logger.With("group", s.GroupID, "mission", s.MissionID, "item", s.WorkItemID, "lease", s.LeaseID,
		"ownershipEpoch", s.OwnershipEpoch, "attempt", w.attempt, "capability", s.Capability.ID)
}

// Attempt is the 1-based attempt number, counting earlier runs.
func (w *Work) Attempt() uint64 { return w.attempt }

// Contract returns a fresh copy of the Work Contract.
func (w *Work) Contract() protocol.WorkContract {
	var c protocol.WorkContract
	// Marshalled by Start from the same type: cannot fail.
	_ = json.Unmarshal(w.r.contract, &c)
	return c
}

// Context returns a copy of the WorkItem's Context Package (JSON, or nil).
func (w *Work) Context() []byte { return bytes.Clone(w.r.ctxPkg) }

// Extensions returns the extensions the item's offer carried, by profile
// URI (spec 18); nil when it carried none.
func (w *Work) Extensions() protocol.Extensions { return maps.Clone(w.r.exts) }

// MaxCitedEvents bounds one CitedEvents answer.
const MaxCitedEvents = 256

// CitedEvents returns up to limit (at most MaxCitedEvents) of the events the
// Context Package cites, from sequence from on (0: its first), as the
// authority signed them; fewer, or none, past the last one the worker has.
// The host reads them as the worker's membership of the package's Group
// allows (spec 13.3): MEMBERSHIP_REQUIRED once it has ended. Without a
// package it is INVALID_COMMAND.
func (w *Work) CitedEvents(ctx context.Context, from uint64, limit int) ([]json.RawMessage, error) {
	if len(w.r.ctxPkg) == 0 {
		return nil, protocol.InvalidCommand("slots: this run has no context package")
	}
	// Checked by Start: it decodes.
	p, err := protocol.DecodeContextPackage(w.r.ctxPkg, protocol.DecodeOptions{})
	if err != nil {
		return nil, err
	}
	if w.r.cited == nil {
		return nil, protocol.Errorf(protocol.CodeMembershipRequired, "slots: the host gives no events")
	}
	r := p.SourceEvents
	r.FromSequence = max(r.FromSequence, from)
	if limit <= 0 || limit > MaxCitedEvents {
		limit = MaxCitedEvents
	}
	if r.FromSequence > r.ToSequence {
		return []json.RawMessage{}, nil
	}
	return w.r.cited(ctx, r, limit)
}

// Workdir is the run's private working directory, removed when it ends.
func (w *Work) Workdir() string { return w.r.workdir }

// PreemptRequested closes when the handler should reach a safe point,
// checkpoint and return ErrPreempted (or stop, when the lease was lost).
func (w *Work) PreemptRequested() <-chan struct{} { return w.r.preempt }

// Resume returns the state of the newest checkpoint of this WorkItem when
// the attempt started (across ownership epochs), if there is one.
func (w *Work) Resume() (state []byte, ok bool) {
	if w.resume == nil {
		return nil, false
	}
	return bytes.Clone(w.resume.State), true
}

// ResumeMeta returns the metadata of the checkpoint Resume returns.
func (w *Work) ResumeMeta() (checkpoint.Meta, bool) {
	if w.resume == nil {
		return checkpoint.Meta{}, false
	}
	return w.resume.Meta, true
}

// Credentials returns the lease-scoped credentials. Their expiry is capped
// at the lease's; once expired, or once the lease is lost, it fails with
// WORK_LEASE_EXPIRED.
func (w *Work) Credentials() (Credentials, error) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := w.activeLocked(r.pool.cfg.Clock.Now()); err != nil {
		return Credentials{}, err
	}
	c := r.creds
	if r.leaseExpires.Before(c.ExpiresAt) || c.ExpiresAt.IsZero() {
		c.ExpiresAt = r.leaseExpires
	}
	return c, nil
}

// endedLocked is ErrEnded once the handler may no longer act: its attempt
// returned, it blocked, or it was cancelled.
func (w *Work) endedLocked() error {
	if w.done || w.r.blocked != nil || w.r.killed != nil {
		return ErrEnded
	}
	return nil
}

// activeLocked also requires a live lease and live credentials: what any
// externally visible act needs.
func (w *Work) activeLocked(now time.Time) error {
	r := w.r
	if err := w.endedLocked(); err != nil {
		return err
	}
	if r.leaseLost {
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "slots: lease %s was lost", r.slot.LeaseID)
	}
	exp := r.leaseExpires
	if !r.creds.ExpiresAt.IsZero() && r.creds.ExpiresAt.Before(exp) {
		exp = r.creds.ExpiresAt
	}
	if !now.Before(exp) {
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "slots: credentials of lease %s expired at %s", r.slot.LeaseID, exp.UTC().Format(time.RFC3339))
	}
	return nil
}

// Progress sends a structured report (spec 11.4): a phase, milestones,
// the next checkpoint, blockers, a revised estimate with a confidence in
// [0, 1], and evidence references. There are no percentages.
func (w *Work) Progress(ctx context.Context, p protocol.Progress) error {
	if p.Phase == "" {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: progress needs a phase")
	}
	if c := p.RevisedEstimate.Confidence; !(c >= 0 && c <= 1) {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: confidence %v is outside [0, 1]", c)
	}
	r := w.r
	r.mu.Lock()
	err := w.activeLocked(r.pool.cfg.Clock.Now())
	r.mu.Unlock()
	if err != nil {
		return err
	}
	p = cloneProgress(p)
	if err := r.pool.cfg.Host.Progress(ctx, r.slot, p); err != nil {
		return fmt.Errorf("slots: progress: %w", err)
	}
	r.mu.Lock()
	r.progress = &p
	r.mu.Unlock()
	return nil
}

// Checkpoint durably saves state under this execution's own namespace
// (group, item, ownership epoch) and then tells the host. It is the
// handler's safe point. After a lease loss it still saves locally but the
// host is not told.
func (w *Work) Checkpoint(ctx context.Context, state []byte, meta checkpoint.Meta) (checkpoint.Checkpoint, error) {
	c, leaseLost, err := w.save(state, meta)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if !leaseLost {
		if err := w.r.pool.cfg.Host.Checkpointed(ctx, w.r.slot, c); err != nil {
			return c, fmt.Errorf("slots: checkpoint %s saved, host: %w", c.ID, err)
		}
	}
	return c, nil
}

func (w *Work) save(state []byte, meta checkpoint.Meta) (checkpoint.Checkpoint, bool, error) {
	r := w.r
	r.mu.Lock()
	err := w.endedLocked()
	r.mu.Unlock()
	if err != nil {
		return checkpoint.Checkpoint{}, false, err
	}
	k := checkpoint.Key{GroupID: r.slot.GroupID, WorkItemID: r.slot.WorkItemID, OwnershipEpoch: r.slot.OwnershipEpoch}
	c, err := r.pool.cfg.Checkpoints.Save(k, r.pool.cfg.Clock.Now(), meta, state)
	if err != nil {
		return checkpoint.Checkpoint{}, false, err
	}
	c.State = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastCP = &c
	return c, r.leaseLost, nil
}

// Block saves state as a checkpoint and ends the run as blocked on res:
// the host sends work.block and the slot is freed. The handler returns
// the ErrBlocked it gets.
func (w *Work) Block(ctx context.Context, res protocol.Resolution, state []byte) error {
	switch res.Kind {
	case protocol.ResolutionClarification, protocol.ResolutionDependency, protocol.ResolutionApproval,
		protocol.ResolutionResource, protocol.ResolutionSubwork, protocol.ResolutionOther:
	default:
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: unknown resolution kind %q", res.Kind)
	}
	if res.Detail == "" {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: a block needs a detail")
	}
	if _, _, err := w.save(state, checkpoint.Meta{Phase: "blocked"}); err != nil {
		return err
	}
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := w.endedLocked(); err != nil {
		return err
	}
	r.blocked = &res
	return ErrBlocked
}

// PublishArtifact publishes data of one media type with the host's
// defaults for the rest of the manifest; see Publish.
func (w *Work) PublishArtifact(ctx context.Context, mediaType string, data []byte) (string, error) {
	return w.Publish(ctx, Artifact{MediaType: mediaType, Data: data})
}

// Publish stores an artifact through the host and returns its digest,
// which is checked against the data.
func (w *Work) Publish(ctx context.Context, a Artifact) (string, error) {
	if err := a.check(); err != nil {
		return "", err
	}
	r := w.r
	r.mu.Lock()
	err := w.activeLocked(r.pool.cfg.Clock.Now())
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	a.Data = bytes.Clone(a.Data)
	a.ToolVersions = maps.Clone(a.ToolVersions)
	d, err := r.pool.cfg.Host.PublishArtifact(ctx, r.slot, a)
	if err != nil {
		return "", fmt.Errorf("slots: publish: %w", err)
	}
	if want := protocol.Digest(a.Data); d != want {
		return "", protocol.Errorf(protocol.CodeInternalError, "slots: host returned digest %s for content %s", d, want)
	}
	return d, nil
}

// check refuses what no manifest may carry.
func (a Artifact) check() error {
	if a.MediaType == "" {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: an artifact needs a media type")
	}
	if a.Classification != "" && a.Classification.Rank() == 0 {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: unknown classification %q (public, internal, confidential or restricted)", a.Classification)
	}
	for k := range a.ToolVersions {
		if k == "" {
			return protocol.Errorf(protocol.CodeInvalidCommand, "slots: a tool version needs the tool's name")
		}
	}
	return nil
}

func cloneProgress(p protocol.Progress) protocol.Progress {
	p.MilestonesCompleted = slices.Clone(p.MilestonesCompleted)
	p.Blockers = slices.Clone(p.Blockers)
	p.EvidenceRefs = slices.Clone(p.EvidenceRefs)
	return p
}

// finite reports whether every float dimension of u is a finite,
// non-negative number.
func finite(u protocol.Usage) bool {
	for _, f := range []float64{u.Money, u.ComputeSeconds, u.WallClockSeconds} {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return false
		}
	}
	return true
}
