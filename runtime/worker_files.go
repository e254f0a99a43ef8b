package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
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
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// memberships reads this agent's membership epoch in every Group from the
// events in the store's inboxes (queue/doc.go layout: groups/<id>/inbox).
// The projection does not keep memberships; commands must carry them.
func memberships(db *bolt.DB, agentID string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := db.View(func(tx *bolt.Tx) error {
		groups := tx.Bucket([]byte("groups"))
		if groups == nil {
			return nil
		}
		return groups.ForEachBucket(func(g []byte) error {
			inbox := groups.Bucket(g).Bucket([]byte("inbox"))
			if inbox == nil {
				return nil
			}
			return inbox.ForEach(func(_, v []byte) error {
				if epoch, ended, ok := membershipOf(v, agentID); ok {
					if ended {
						delete(out, string(g))
					} else {
						out[string(g)] = epoch
					}
				}
				return nil
			})
		})
	})
	return out, err
}

var membershipMark = []byte(`"membership.`)

// membershipOf reads a membership.changed or membership.ended event about
// agentID: the epoch, and whether the membership ended.
func membershipOf(raw []byte, agentID string) (epoch uint64, ended, ok bool) {
	if !bytes.Contains(raw, membershipMark) {
		return 0, false, false
	}
	var ev struct {
		Type    protocol.EventType `json:"type"`
		Payload struct {
			Principal       protocol.Actor           `json:"principal"`
			State           protocol.MembershipState `json:"state"`
			MembershipEpoch uint64                   `json:"membershipEpoch"`
		} `json:"payload"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return 0, false, false
	}
	p := ev.Payload
	if p.Principal.Kind != protocol.ActorAgent || p.Principal.ID != agentID {
		return 0, false, false
	}
	switch ev.Type {
	case protocol.EvtMembershipChanged, protocol.EvtMembershipDelegationGranted:
		return p.MembershipEpoch, p.State != protocol.MembershipActive, true
	case protocol.EvtMembershipEnded:
		return p.MembershipEpoch, true, true
	}
	return 0, false, false
}
