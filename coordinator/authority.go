package coordinator

import (
	"context"

	"github.com/missionweave/mwp-worker/protocol"
)

// Authority is the Group Authority as a coordinator, a Mission owner or a
// human reaches it: in process (authority-lite/embed) or over the wire
// (package remote). The coordinator signs its own commands; the Authority
// only carries them and the log.
type Authority interface {
	// Submit sends one signed command and returns its receipt; a refusal
	// is a *protocol.Error with the authority's code. Sending the same
	// bytes again returns the stored receipt.
	Submit(ctx context.Context, signed []byte) (*protocol.Receipt, error)
	// Events returns up to max (0: all there are) events of groupID after
	// sequence after, in order, as the authority signed them (JCS bytes).
	// Every event's signature has been verified against the authority's
	// key before it is returned.
	Events(ctx context.Context, groupID string, after uint64, max int) ([]SignedEvent, error)
	// Wait returns when groupID's log holds an event after sequence after,
	// or when ctx ends (its error).
	Wait(ctx context.Context, groupID string, after uint64) error
	// PutArtifact stores bytes in the authority's artifact store and
	// returns their digest ("sha256:…") and the URI a manifest names.
	PutArtifact(ctx context.Context, data []byte) (digest, uri string, err error)
	// Artifact returns the bytes stored under digest, checked against it.
	Artifact(ctx context.Context, digest string) ([]byte, error)
	// AgentCard returns the registered Agent Card of an agent.
	AgentCard(ctx context.Context, agentID string) (protocol.AgentCard, error)
	// SessionEpoch is the caller's current session epoch (agents; 0 for
	// humans), which its commands carry.
	SessionEpoch() uint64
}

// SignedEvent is one event of a Group's log. It is protocol's type so
// that an implementation (authority-lite/embed, remote) need not import
// this package to satisfy Authority.
type SignedEvent = protocol.LogEvent

// Snapshots is what an Authority adds so that a coordinator behind the
// online log (the authority compacted it: CURSOR_TOO_OLD) restores the
// Group Snapshot the refusal names and reads on after it. Without it such
// a Group stops the coordinator with CURSOR_TOO_OLD.
type Snapshots interface {
	// Snapshot returns the Group Snapshot ref names, checked against
	// ref's digest and the authority's signature (group.CheckSnapshot).
	Snapshot(ctx context.Context, ref protocol.SnapshotRef) (*protocol.GroupSnapshot, error)
}
