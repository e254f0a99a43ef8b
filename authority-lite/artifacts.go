package authoritylite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Artifacts live outside the log, content-addressed under DIR/artifacts;
// the log carries only the signed manifest (spec 13.1). Every read checks
// the hash, so a corrupted file is reported, never served.

func (s *Service) artifactPath(digest string) (string, error) {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 {
		return "", protocol.Errorf(protocol.CodeInvalidCommand, "artifact digest %q is not sha256:<64 hex>", digest)
	}
	if _, err := hex.DecodeString(hexPart); err != nil || strings.ToLower(hexPart) != hexPart {
		return "", protocol.Errorf(protocol.CodeInvalidCommand, "artifact digest %q is not lowercase hex", digest)
	}
	return filepath.Join(s.cfg.Dir, "artifacts", hexPart[:2], hexPart), nil
}

// PutArtifact stores bytes and returns their content hash. Storing the
// same bytes again is a no-op.
func (s *Service) PutArtifact(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	path, _ := s.artifactPath(digest)
	if _, err := os.Stat(path); err == nil {
		return digest, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return digest, nil
}

// Artifact returns stored bytes after checking their hash.
func (s *Service) Artifact(digest string) ([]byte, error) {
	path, err := s.artifactPath(digest)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, protocol.Errorf(protocol.CodeInvalidCommand, "artifact %s is not in the store", digest)
		}
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("artifact store: %s is corrupt (content hashes to %s)", digest, got)
	}
	return data, nil
}

// publishArtifact checks artifact.publish: the content is in the store with
// the declared hash and size, the manifest is signed by its producer, the
// producer is the actor, and a worker names its current lease.
func (s *Service) publishArtifact(c *call, gs *groupState, p *pending) error {
	pl := c.payload.(*protocol.PublishArtifactPayload)
	m := pl.Manifest
	if m.GroupID != gs.id || (gs.g.Mission != nil && m.MissionID != gs.g.Mission.MissionID) {
		return protocol.InvalidCommand("manifest names group %s / mission %s, not this Group's", m.GroupID, m.MissionID).At("/payload/manifest/groupId")
	}
	if c.cmd.Actor.Kind != protocol.ActorAgent || m.Producer.AgentID != c.cmd.Actor.ID {
		return protocol.Forbidden("an artifact is published by its producing agent")
	}
	if err := s.verifyManifest(&m); err != nil {
		return err
	}
	data, err := s.Artifact(m.ContentHash)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return pe.At("/payload/manifest/contentHash")
		}
		return protocol.Errorf(protocol.CodeInvalidCommand, "%v", err).At("/payload/manifest/contentHash")
	}
	if uint64(len(data)) != m.Size {
		return protocol.InvalidCommand("manifest size %d, stored content is %d bytes", m.Size, len(data)).At("/payload/manifest/size")
	}
	w := gs.g.Items[m.WorkItemID]
	if w == nil {
		return protocol.InvalidCommand("work item %s not found", m.WorkItemID).At("/payload/manifest/workItemId")
	}
	if err := s.checkProducer(m.Producer); err != nil {
		return err
	}
	if err := checkSources(gs, w, m.SourceArtifacts); err != nil {
		return err
	}
	coordinator := gs.g.Mission != nil && gs.g.Mission.Coordinator != nil && gs.g.Mission.Coordinator.AgentID == c.cmd.Actor.ID
	if pl.OwnershipEpoch != nil || pl.LeaseID != "" || !coordinator {
		if pl.OwnershipEpoch == nil || pl.LeaseID == "" {
			return protocol.InvalidCommand("a worker publishes under its lease: ownershipEpoch and leaseId are required").At("/payload/leaseId")
		}
		if err := w.CheckLease(c.cmd.Actor.ID, c.cmd.SessionEpoch, *pl.OwnershipEpoch, pl.LeaseID, c.now); err != nil {
			return err
		}
	}
	// The same content may be published again (another lease of the item,
	// another item): each manifest is a new revision of the artifact.
	rev := gs.artifacts[m.ContentHash] + 1
	gs.artifacts[m.ContentHash] = rev
	p.artifacts = true
	p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtArtifactPublished, Aggregate: protocol.Aggregate{Kind: protocol.AggregateArtifact, ID: m.ContentHash}, Revision: rev, Actor: c.cmd.Actor, Payload: &group.ArtifactPublished{Manifest: m}})
	return nil
}

// checkProducer holds a manifest's producer to the registered Agent Card
// (spec 13.1): the card hash and agent version it names are the card's.
func (s *Service) checkProducer(p protocol.ArtifactProducer) error {
	a := s.org.agent(p.AgentID)
	if a == nil {
		return protocol.Forbidden("producer %s has no registered Agent Card", p.AgentID).At("/payload/manifest/producer/agentId")
	}
	if p.AgentCardHash != a.CardHash {
		return protocol.InvalidCommand("producer agentCardHash %s is not the registered card's %s", p.AgentCardHash, a.CardHash).At("/payload/manifest/producer/agentCardHash")
	}
	if p.AgentVersion != a.Card.AgentVersion {
		return protocol.InvalidCommand("producer agentVersion %q is not the registered card's %q", p.AgentVersion, a.Card.AgentVersion).At("/payload/manifest/producer/agentVersion")
	}
	return nil
}

// checkSources refuses provenance the Group cannot account for: every
// source artifact was published in this Group or is an input of the item's
// contract.
func checkSources(gs *groupState, w *group.WorkItem, sources []string) error {
	for i, src := range sources {
		if gs.artifacts[src] > 0 || slices.ContainsFunc(w.Contract.Inputs, func(in protocol.InputRef) bool { return in.Artifact == src }) {
			continue
		}
		return protocol.InvalidCommand("source artifact %s is neither published in this Group nor an input of %s", src, w.WorkItemID).At(fmt.Sprintf("/payload/manifest/sourceArtifacts/%d", i))
	}
	return nil
}

func (s *Service) verifyManifest(m *protocol.ArtifactManifest) error {
	raw, err := protocol.Marshal(m)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidCommand, "manifest: %v", err)
	}
	doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	if err := protocol.Verify(doc.(map[string]any), s.org); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return pe.At("/payload/manifest/signature")
		}
		return err
	}
	if !protocol.KeyBelongsTo(m.Signature.KeyID, protocol.ActorAgent, m.Producer.AgentID) {
		return protocol.Errorf(protocol.CodeAuthInvalidSignature, "manifest key %s does not belong to producer %s", m.Signature.KeyID, m.Producer.AgentID).At("/payload/manifest/signature/keyId")
	}
	return nil
}
