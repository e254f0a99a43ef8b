package embed

import (
	"context"
	"fmt"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Actor is one actor's way to the in-process authority: a coordinator,
// a Mission owner or a human. It has the method set of
// coordinator.Authority (Go matches it by structure; embed does not import
// the coordinator). The actor signs its own commands; Actor only carries
// them and reads the log.
type Actor struct {
	svc   *authoritylite.Service
	actor protocol.Actor
}

// NewActor returns the authority as actor reaches it.
func NewActor(svc *authoritylite.Service, actor protocol.Actor) *Actor {
	return &Actor{svc: svc, actor: actor}
}

// Submit hands one signed command to the authority.
func (a *Actor) Submit(ctx context.Context, signed []byte) (*protocol.Receipt, error) {
	return a.svc.Submit(ctx, "", signed)
}

// Events returns a Group's events after a sequence, each checked against
// the authority's signature.
func (a *Actor) Events(ctx context.Context, groupID string, after uint64, max int) ([]protocol.LogEvent, error) {
	stored, err := a.svc.Events(groupID, after, max)
	if err != nil {
		return nil, err
	}
	keys := protocol.NewKeySet(a.svc.PublicKey())
	out := make([]protocol.LogEvent, 0, len(stored))
	for _, se := range stored {
		doc, err := protocol.Parse(se.Raw, protocol.DecodeOptions{})
		if err != nil {
			return nil, err
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, protocol.Errorf(protocol.CodeProtocolViolation, "event %d is not an object", se.Sequence)
		}
		if err := protocol.Verify(m, keys); err != nil {
			return nil, fmt.Errorf("event %d: %w", se.Sequence, err)
		}
		out = append(out, protocol.LogEvent{Sequence: se.Sequence, Raw: se.Raw})
	}
	return out, nil
}

// Snapshot returns the stored Group Snapshot ref names, checked against
// ref and the authority's key (coordinator.Snapshots).
func (a *Actor) Snapshot(_ context.Context, ref protocol.SnapshotRef) (*protocol.GroupSnapshot, error) {
	doc, err := a.svc.Snapshot(ref)
	if err != nil {
		return nil, err
	}
	keys := protocol.NewKeySet(a.svc.PublicKey())
	snap, _, err := group.CheckSnapshot(ref, doc, func(m map[string]any) error { return protocol.Verify(m, keys) })
	return snap, err
}

// Wait returns once the Group's log passes after, or with ctx's error.
func (a *Actor) Wait(ctx context.Context, groupID string, after uint64) error {
	select {
	case <-a.svc.Changed(groupID, after):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PutArtifact stores bytes in the authority's artifact store.
func (a *Actor) PutArtifact(_ context.Context, data []byte) (digest, uri string, err error) {
	d, err := a.svc.PutArtifact(data)
	if err != nil {
		return "", "", err
	}
	return d, "mwp-artifact:" + d, nil
}

// Artifact returns stored bytes, checked against their digest.
func (a *Actor) Artifact(_ context.Context, digest string) ([]byte, error) {
	return a.svc.Artifact(digest)
}

// AgentCard returns an agent's registered card.
func (a *Actor) AgentCard(_ context.Context, agentID string) (protocol.AgentCard, error) {
	card, ok := a.svc.AgentCard(agentID)
	if !ok {
		return protocol.AgentCard{}, protocol.Errorf(protocol.CodeAuthForbidden, "agent %s has no registered Agent Card", agentID)
	}
	return card, nil
}

// SessionEpoch is the actor's current session epoch (0 for a human).
func (a *Actor) SessionEpoch() uint64 {
	if a.actor.Kind != protocol.ActorAgent {
		return 0
	}
	return a.svc.SessionEpoch(a.actor.ID)
}
