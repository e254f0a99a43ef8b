package authoritylite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// publishArtifact checks what only the service can of an artifact.publish
// (the manifest's signature, the stored content's size) between the
// Group's rules of group/artifacts.go: the scope first, the WorkItem,
// producer card, sources and lease last.
func (s *Service) publishArtifact(c *call, gs *groupState, p *pending) error {
	in := group.InputFromCommand(c.cmd, c.payload)
	if err := group.CheckManifestScope(gs.g, in); err != nil {
		return err
	}
	m := c.payload.(*protocol.PublishArtifactPayload).Manifest
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
	d, err := gs.artifacts.DecidePublish(gs.g, in, directory{s.org}, c.now)
	return decided(gs, p, d, err)
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
