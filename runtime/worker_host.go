package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// host is the slots.Host of a Worker. Slot goroutines call it; it only
// posts to the loop, reads shared state, or stores artifact bytes.
type host struct{ e *engine }

var _ slots.Host = (*host)(nil)

// errOfflineRisk refuses a risky tool operation while the authority is
// unreachable (spec 11.5).
var errOfflineRisk = errors.New("runtime: offline: high-risk, irreversible or externally visible operations wait for the authority")

func (h *host) Progress(_ context.Context, s slots.Slot, p protocol.Progress) error {
	h.e.mb.post(msgProgress{key: itemKey{s.GroupID, s.WorkItemID}, leaseID: s.LeaseID, p: p})
	return nil
}

// Checkpointed needs nothing sent: work.checkpoint releases the lease, so it
// goes only with a Preempted outcome; the checkpoint is durable already.
func (h *host) Checkpointed(context.Context, slots.Slot, checkpoint.Checkpoint) error { return nil }

// PublishArtifact stores the bytes (the authority's store when embedded,
// else this worker's directory) and has the loop send the signed manifest
// in the item's command order.
func (h *host) PublishArtifact(_ context.Context, s slots.Slot, mediaType string, data []byte) (string, error) {
	e := h.e
	digest := protocol.Digest(data)
	var uri string
	publish := false
	if e.cfg.Artifacts != nil {
		var err error
		if uri, publish, err = e.cfg.Artifacts(data); err != nil {
			return "", err
		}
	} else {
		var err error
		if digest, uri, err = storeArtifact(e.cfg.Dir, data); err != nil {
			return "", err
		}
	}
	if !publish {
		return digest, nil
	}
	now := e.cfg.Clock.Now()
	// Provenance (spec 13.1): an output derives from the item's inputs.
	sources := protocol.List[string]{}
	if c, err := e.store.Contract(s.GroupID, s.WorkItemID); err == nil {
		for _, in := range c.Inputs {
			if in.Artifact != "" && !slices.Contains(sources, in.Artifact) {
				sources = append(sources, in.Artifact)
			}
		}
	}
	m := protocol.ArtifactManifest{
		ContentHash: digest, MediaType: mediaType,
		Producer:  protocol.ArtifactProducer{AgentID: e.cfg.AgentID, AgentVersion: e.sess.card.AgentVersion, AgentCardHash: e.sess.cardHash},
		MissionID: s.MissionID, GroupID: s.GroupID, WorkItemID: s.WorkItemID,
		SourceArtifacts: sources, ToolVersions: protocol.StringMap{},
		CreatedAt: protocol.NewTime(now), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: uri,
	}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: e.cfg.Key.KeyID, CreatedAt: m.CreatedAt}
	raw, err := protocol.SignedValue(m, e.cfg.Key)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	e.mb.post(msgPublish{key: itemKey{s.GroupID, s.WorkItemID}, leaseID: s.LeaseID, m: m})
	return digest, nil
}

func (h *host) Allow(_ context.Context, _ slots.Slot, r slots.Risk) error {
	if h.e.shared.isOnline() || r.AllowedOffline() {
		return nil
	}
	return errOfflineRisk
}

// Remaining leaves the contract's own budgets to the slot; the authority
// charges the Mission's.
func (h *host) Remaining(context.Context, slots.Slot) (protocol.Budgets, error) {
	return protocol.Budgets{}, nil
}

func (h *host) Finish(o slots.Outcome) { h.e.mb.post(msgOutcome{o}) }

var _ slots.ArtifactReader = (*host)(nil)

// ReadArtifact answers a handler's fetch: the bytes from this worker's own
// store when it kept them, else from the authority (WorkerConfig.
// FetchArtifact). The slot has checked that the digest is an input of the
// item; it also checks the bytes' hash and size.
func (h *host) ReadArtifact(ctx context.Context, _ slots.Slot, digest string) ([]byte, error) {
	e := h.e
	if data, ok, err := readStoredArtifact(e.cfg.Dir, digest); err != nil || ok {
		return data, err
	}
	if e.cfg.FetchArtifact == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "runtime: artifact %s is not in this worker's store and no authority store is configured", digest)
	}
	return e.cfg.FetchArtifact(ctx, digest)
}
