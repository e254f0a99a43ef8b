package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// The worker's files beside its store.
const (
	SessionFile  = "session.json" // {"sessionEpoch": N}, the last session opened
	ArtifactsDir = "artifacts"    // published artifact bytes, by sha256 hex
)

func loadEpoch(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, SessionFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v struct {
		SessionEpoch uint64 `json:"sessionEpoch"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("runtime: %s: %w", SessionFile, err)
	}
	return v.SessionEpoch, nil
}

// saveEpoch writes the epoch atomically (temp file, fsync, rename, fsync of
// the directory): a crash leaves the old or the new value.
func saveEpoch(dir string, epoch uint64) error {
	b, _ := json.Marshal(map[string]uint64{"sessionEpoch": epoch})
	return writeAtomic(dir, SessionFile, b)
}

func writeAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), data, 0o600)
}

// storeArtifact keeps bytes under Dir/artifacts/<sha256 hex> and returns
// their digest and a file:// URI. The digest is the identity; the URI only
// says where this worker keeps a copy (spec 13.1).
func storeArtifact(dir string, data []byte) (digest, uri string, err error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	adir := filepath.Join(dir, ArtifactsDir)
	path := filepath.Join(adir, h)
	if _, err := os.Stat(path); err != nil {
		if err := writeAtomic(adir, h, data); err != nil {
			return "", "", err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	return "sha256:" + h, "file://" + abs, nil
}

// readStoredArtifact returns the bytes storeArtifact kept under digest;
// ok is false when this worker has none.
func readStoredArtifact(dir, digest string) (data []byte, ok bool, err error) {
	h, found := strings.CutPrefix(digest, "sha256:")
	if !found || len(h) != sha256.Size*2 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil, false, protocol.Errorf(protocol.CodeInvalidCommand, "runtime: %q is not a sha256 digest", digest)
	}
	data, err = os.ReadFile(filepath.Join(dir, ArtifactsDir, h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// memberships reads this agent's active membership epoch in every Group
// from the store's view (kept from membership events and restored
// snapshots alike): what commands must carry.
func memberships(store *queue.Store, agentID string) map[string]uint64 {
	out := map[string]uint64{}
	for _, g := range store.GroupIDs() {
		if epoch, ok := membershipIn(store, g, agentID); ok {
			out[g] = epoch
		}
	}
	return out
}

// membershipIn returns agentID's epoch in group when the membership is active.
func membershipIn(store *queue.Store, group, agentID string) (uint64, bool) {
	m, ok := store.Membership(group, protocol.Actor{Kind: protocol.ActorAgent, ID: agentID})
	if !ok || !m.Active() {
		return 0, false
	}
	return m.Epoch, true
}
