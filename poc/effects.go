package poc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// The integration repository is the PoC's external system: a small fake
// service whose state lives in its own bbolt file (EffectsFile under the
// data dir). Applying a patch is its one externally visible effect; it is
// keyed by the caller's idempotency key (spec 16), and a repeated key is
// answered with the first result without a second effect. The repository
// files, the effect and the key index change in one transaction, so a
// crash leaves all or nothing. Its effect log is what the invariant "one
// external effect per idempotency key" reads.

// The integration tool and operation named in contracts and ToolCall.
const (
	IntegrationTool      = "integration-repo"
	IntegrationOperation = "apply-patch"
	EffectsFile          = "effects.db"
)

var (
	bktEffects  = []byte("effects")  // seq → Effect JSON: the append-only effect log
	bktKeys     = []byte("keys")     // idempotency key → seq
	bktPatches  = []byte("patches")  // patch digest → seq of its last effect (not consulted by Apply)
	bktRequests = []byte("requests") // seq → Request JSON: every call, repeats included
	bktRepo     = []byte("repo")     // path → content
)

// Effect is one applied change to the integration repository.
type Effect struct {
	Seq         uint64        `json:"seq"`
	Key         string        `json:"key"`
	Operation   string        `json:"operation"`
	PatchDigest string        `json:"patchDigest"`
	Files       []string      `json:"files"`
	Commit      string        `json:"commit"` // digest of the repository after the change
	At          protocol.Time `json:"at"`
}

// Request is one call to the service; a repeat got the first result.
type Request struct {
	Seq       uint64        `json:"seq"`
	Key       string        `json:"key"`
	EffectSeq uint64        `json:"effectSeq"`
	Repeat    bool          `json:"repeat"`
	At        protocol.Time `json:"at"`
}

// EffectLog is the integration repository service.
type EffectLog struct {
	db    *bolt.DB
	clock clock.Clock
}

// OpenEffectLog opens (creating and seeding with baseline when new) the
// service's store at path.
func OpenEffectLog(path string, clk clock.Clock, baseline Tree) (*EffectLog, error) {
	if clk == nil {
		clk = clock.Real{}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("effects: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("effects: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bktEffects, bktKeys, bktPatches, bktRequests} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bktRepo) != nil {
			return nil
		}
		repo, err := tx.CreateBucket(bktRepo)
		if err != nil {
			return err
		}
		for p, c := range baseline {
			if err := repo.Put([]byte(p), []byte(c)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("effects: %w", err)
	}
	return &EffectLog{db: db, clock: clk}, nil
}

// Close closes the store.
func (l *EffectLog) Close() error { return l.db.Close() }

// ErrConflict is a patch that does not apply to the repository.
var ErrConflict = errors.New("effects: the patch does not apply to the integration repository")

// Apply applies patch (whose content hash is patchDigest) under key. A key
// seen before returns its first effect with repeat set and changes
// nothing. Only the key protects the repository: the same patch under a
// new key is applied again (or, when it no longer applies, refused as a
// conflict), as a real service that honours idempotency keys and nothing
// else would do; the patches index only lets the checks find a patch
// applied under two keys. A patch that does not apply is ErrConflict and
// leaves no effect.
func (l *EffectLog) Apply(key, patchDigest, patch string) (eff Effect, repeat bool, err error) {
	if key == "" || patchDigest == "" {
		return Effect{}, false, fmt.Errorf("effects: a key and a patch digest are required")
	}
	if got := protocol.Digest([]byte(patch)); got != patchDigest {
		return Effect{}, false, fmt.Errorf("effects: patch hashes to %s, not %s", got, patchDigest)
	}
	now := protocol.NewTime(l.clock.Now())
	err = l.db.Update(func(tx *bolt.Tx) error {
		effs := tx.Bucket(bktEffects)
		if seq := tx.Bucket(bktKeys).Get([]byte(key)); seq != nil {
			repeat = true
			if err := json.Unmarshal(effs.Get(seq), &eff); err != nil {
				return err
			}
			return putRequest(tx, Request{Key: key, EffectSeq: eff.Seq, Repeat: true, At: now})
		}
		repo := tx.Bucket(bktRepo)
		tree := Tree{}
		if err := repo.ForEach(func(k, v []byte) error { tree[string(k)] = string(v); return nil }); err != nil {
			return err
		}
		next, changes, err := ApplyPatch(tree, patch)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrConflict, err)
		}
		files := make([]string, len(changes))
		for i, c := range changes {
			files[i] = c.Path
			if c.Deleted {
				err = repo.Delete([]byte(c.Path))
			} else {
				err = repo.Put([]byte(c.Path), []byte(next[c.Path]))
			}
			if err != nil {
				return err
			}
		}
		n, err := effs.NextSequence()
		if err != nil {
			return err
		}
		eff = Effect{Seq: n, Key: key, Operation: IntegrationOperation, PatchDigest: patchDigest, Files: files, Commit: treeDigest(next), At: now}
		raw, err := json.Marshal(eff)
		if err != nil {
			return err
		}
		if err := effs.Put(u64key(n), raw); err != nil {
			return err
		}
		if err := tx.Bucket(bktKeys).Put([]byte(key), u64key(n)); err != nil {
			return err
		}
		if err := tx.Bucket(bktPatches).Put([]byte(patchDigest), u64key(n)); err != nil {
			return err
		}
		return putRequest(tx, Request{Key: key, EffectSeq: n, At: now})
	})
	return eff, repeat, err
}

func putRequest(tx *bolt.Tx, r Request) error {
	b := tx.Bucket(bktRequests)
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	r.Seq = n
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put(u64key(n), raw)
}

// Repository returns the repository's current files.
func (l *EffectLog) Repository() (Tree, error) {
	t := Tree{}
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktRepo).ForEach(func(k, v []byte) error { t[string(k)] = string(v); return nil })
	})
	return t, err
}

// EffectRecords is the durable content of an effect log.
type EffectRecords struct {
	Effects  []Effect
	Requests []Request
	// Keys is the key index: idempotency key → effect seq.
	Keys map[string]uint64
}

// Records reads the whole log.
func (l *EffectLog) Records() (EffectRecords, error) { return readRecords(l.db) }

// ReadEffects opens the effect log at path read-only and returns its
// records; it is what the invariants and fault checks read after a run.
func ReadEffects(path string) (EffectRecords, error) {
	if _, err := os.Stat(path); err != nil {
		return EffectRecords{}, fmt.Errorf("effects: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return EffectRecords{}, fmt.Errorf("effects: open %s read-only: %w", path, err)
	}
	defer db.Close()
	return readRecords(db)
}

func readRecords(db *bolt.DB) (EffectRecords, error) {
	r := EffectRecords{Keys: map[string]uint64{}}
	err := db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktEffects).ForEach(func(k, v []byte) error {
			var e Effect
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("effect %d: %w", binary.BigEndian.Uint64(k), err)
			}
			r.Effects = append(r.Effects, e)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bktRequests).ForEach(func(k, v []byte) error {
			var q Request
			if err := json.Unmarshal(v, &q); err != nil {
				return err
			}
			r.Requests = append(r.Requests, q)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bktKeys).ForEach(func(k, v []byte) error {
			r.Keys[string(k)] = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return r, err
}

func u64key(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// treeDigest is the digest of a tree's canonical JSON.
func treeDigest(t Tree) string {
	paths := t.paths()
	pairs := make([][2]string, len(paths))
	for i, p := range paths {
		pairs[i] = [2]string{p, t[p]}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	raw, _ := json.Marshal(pairs)
	return protocol.Digest(raw)
}
