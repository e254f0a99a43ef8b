package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
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
func (h *host) PublishArtifact(ctx context.Context, s slots.Slot, a slots.Artifact) (string, error) {
	e := h.e
	data := a.Data
	digest := protocol.Digest(data)
	var uri string
	publish := false
	if e.cfg.Artifacts != nil {
		var err error
		if uri, publish, err = e.cfg.Artifacts(ctx, data); err != nil {
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
	c, err := e.store.Contract(s.GroupID, s.WorkItemID)
	if err != nil {
		c = protocol.WorkContract{}
	}
	m := protocol.ArtifactManifest{
		ContentHash: digest, MediaType: a.MediaType, Schema: protocol.ManifestSchema(outputSchema(a, c), a.MediaType),
		Producer:  protocol.ArtifactProducer{AgentID: e.cfg.AgentID, AgentVersion: e.sess.card.AgentVersion, AgentCardHash: e.sess.cardHash},
		MissionID: s.MissionID, GroupID: s.GroupID, WorkItemID: s.WorkItemID,
		SourceArtifacts: inputSources(c), ToolVersions: toolVersions(s, a),
		CreatedAt: protocol.NewTime(now), Classification: moreRestricted(a.Classification, e.cfg.Classification),
		Size: uint64(len(data)), URI: uri,
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

// Manifest fields (spec 13.1) beyond what the handler names. They are
// derived here so that every handler, Go or external, gets the same ones.

// inputSources is an output's provenance: the item's input artifacts.
func inputSources(c protocol.WorkContract) protocol.List[string] {
	sources := protocol.List[string]{}
	for _, in := range c.Inputs {
		if in.Artifact != "" && !slices.Contains(sources, in.Artifact) {
			sources = append(sources, in.Artifact)
		}
	}
	return sources
}

// outputSchema is the handler's schema, else that of the required outputs
// of the same media type when they name one schema; "" when neither names
// one, and the manifest then carries the media type's default
// (protocol.ManifestSchema).
func outputSchema(a slots.Artifact, c protocol.WorkContract) string {
	if a.Schema != "" {
		return a.Schema
	}
	schema := ""
	for _, o := range c.RequiredOutputs {
		if o.MediaType == a.MediaType && o.Schema != "" {
			if schema != "" && schema != o.Schema {
				return ""
			}
			schema = o.Schema
		}
	}
	return schema
}

// toolVersions records the handler's tools and the capability version
// that ran; the capability's entry is the registered one.
func toolVersions(s slots.Slot, a slots.Artifact) protocol.StringMap {
	tv := protocol.StringMap{}
	maps.Copy(tv, a.ToolVersions)
	if s.Capability.ID != "" {
		tv[s.Capability.ID] = s.Capability.Version
	}
	return tv
}

// moreRestricted is the more restricted of the handler's classification
// and the worker's floor; an empty floor counts as internal.
func moreRestricted(handler, floor protocol.Classification) protocol.Classification {
	if floor.Rank() == 0 {
		floor = protocol.ClassInternal
	}
	if handler.Rank() > floor.Rank() {
		return handler
	}
	return floor
}

var _ slots.ArtifactReader = (*host)(nil)

// ReadArtifact answers a handler's fetch: the bytes from this worker's own
// store when it kept them, else from the authority (WorkerConfig.
// FetchArtifact). The slot has checked that the digest is an input of the
// item; it also checks the bytes' hash and size.
func (h *host) ReadArtifact(ctx context.Context, s slots.Slot, digest string) ([]byte, error) {
	e := h.e
	if data, ok, err := readStoredArtifact(e.cfg.Dir, digest); err != nil || ok {
		return data, err
	}
	if e.cfg.FetchArtifact == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "runtime: artifact %s is not in this worker's store and no authority store is configured", digest)
	}
	data, err := e.cfg.FetchArtifact(ctx, digest)
	e.log.Debug("input read from the authority", "group", s.GroupID, "item", s.WorkItemID, "artifact", digest, "bytes", len(data), "err", err)
	return data, err
}
