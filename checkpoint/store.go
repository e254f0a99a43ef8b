package checkpoint

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// SchemaVersion is the layout version of the checkpoints bucket.
const SchemaVersion = 1

// Defaults of Options.
const (
	DefaultInlineMax = 16 << 10
	DefaultKeep      = 4
	// MaxMetaBytes bounds Phase plus Note.
	MaxMetaBytes = 1 << 10
)

var (
	// ErrNotFound: no such checkpoint, or none for the WorkItem.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrCorrupt: stored bytes do not match their digest or shape. A
	// corrupt checkpoint is never returned.
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrSchema: the bucket was written with another layout.
	ErrSchema = errors.New("checkpoint: unsupported schema version")
)

// Options tune a Store. The zero value is ready for production.
type Options struct {
	// InlineMax is the largest state kept inside the bbolt record; larger
	// state goes to a blob file. 0 means DefaultInlineMax.
	InlineMax int
	// Keep is how many checkpoints of a WorkItem survive a Save (the
	// newest). 0 means DefaultKeep.
	Keep int
}

var (
	bktRoot    = []byte("checkpoints")
	bktMeta    = []byte("meta")
	bktRecords = []byte("records")
	bktIndex   = []byte("index")
	bktBlobs   = []byte("blobs")
	keySchema  = []byte("schema")
)

// Store keeps checkpoints in the checkpoints bucket of a bbolt file owned
// by someone else (queue.Store.DB) and large states under a blob directory.
// It is safe for concurrent use; writers are serialized. Use one Store per
// bbolt file and blob directory.
type Store struct {
	db   *bolt.DB
	dir  string
	opts Options
	sync bool

	// mu orders blob files against records: writers (Save, Delete, GC) hold
	// it exclusively so a blob is never removed between another writer's
	// file write and its commit; readers hold it shared so a file is not
	// removed while they read it.
	mu sync.RWMutex
	// afterBlob, when set (tests only), runs after a blob is durable and
	// before its record commits; an error aborts the Save.
	afterBlob func() error
}

// Open is OpenOptions with default options.
func Open(db *bolt.DB, blobDir string) (*Store, error) {
	return OpenOptions(db, blobDir, Options{})
}

// OpenOptions creates the checkpoints bucket tree if needed, checks its
// schema version, and collects blob files no record references (left by
// a crash between a blob write and its commit, or by a removal that did
// not finish).
func OpenOptions(db *bolt.DB, blobDir string, opts Options) (*Store, error) {
	if opts.InlineMax <= 0 {
		opts.InlineMax = DefaultInlineMax
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if err := os.MkdirAll(blobDir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: blob dir: %w", err)
	}
	s := &Store{db: db, dir: blobDir, opts: opts, sync: !db.NoSync}
	err := db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bktRoot)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bktMeta, bktRecords, bktIndex, bktBlobs} {
			if _, err := root.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := root.Bucket(bktMeta)
		switch v := meta.Get(keySchema); {
		case v == nil:
			return meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion))
		case len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion:
			return ErrSchema
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open: %w", err)
	}
	if _, err := s.GC(); err != nil {
		return nil, err
	}
	return s, nil
}

// Save durably stores state as the newest checkpoint of k, stamped at (the
// caller's clock), and prunes the WorkItem to its newest Options.Keep
// checkpoints. A state over InlineMax is written to a blob file, synced,
// renamed into place and the directory synced before the record commits,
// so a crash leaves either the previous latest checkpoint or this one.
// An epoch below one already stored for the WorkItem is fenced:
// WORK_STALE_OWNERSHIP.
func (s *Store) Save(k Key, at time.Time, meta Meta, state []byte) (Checkpoint, error) {
	if !validID(k.GroupID) || !validID(k.WorkItemID) {
		return Checkpoint{}, protocol.Errorf(protocol.CodeInvalidCommand, "checkpoint: group %q and work item %q must be ids", k.GroupID, k.WorkItemID)
	}
	if len(meta.Phase)+len(meta.Note) > MaxMetaBytes {
		return Checkpoint{}, protocol.Errorf(protocol.CodeInvalidCommand, "checkpoint: metadata is over %d bytes", MaxMetaBytes)
	}
	sum := sha256.Sum256(state)
	hexSum := hex.EncodeToString(sum[:])
	c := Checkpoint{
		ID: newID(), Key: k, At: at.UTC(), Meta: meta,
		Digest: "sha256:" + hexSum, Size: int64(len(state)), Blob: len(state) > s.opts.InlineMax,
	}
	inline := state
	if c.Blob {
		inline = nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Blob {
		if err := s.writeBlob(hexSum, state); err != nil {
			return Checkpoint{}, err
		}
		if s.afterBlob != nil {
			if err := s.afterBlob(); err != nil {
				return Checkpoint{}, err
			}
		}
	}
	var unref []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		unref = unref[:0]
		root := tx.Bucket(bktRoot)
		idx, recs, blobs := root.Bucket(bktIndex), root.Bucket(bktRecords), root.Bucket(bktBlobs)
		prefix := itemPrefix(k.GroupID, k.WorkItemID)
		if last, _ := lastWithPrefix(idx.Cursor(), prefix); last != nil {
			epoch := binary.BigEndian.Uint64(last[len(prefix):])
			if epoch > k.OwnershipEpoch {
				return protocol.Errorf(protocol.CodeWorkStaleOwnership, "checkpoint: %s/%s has checkpoints of ownership epoch %d, above %d", k.GroupID, k.WorkItemID, epoch, k.OwnershipEpoch)
			}
			c.Seq = binary.BigEndian.Uint64(last[len(prefix)+8:])
		}
		c.Seq++
		rec, err := encodeRecord(&c, inline)
		if err != nil {
			return err
		}
		if err := recs.Put([]byte(c.ID), rec); err != nil {
			return err
		}
		if err := idx.Put(indexKey(k, c.Seq), []byte(c.ID)); err != nil {
			return err
		}
		if c.Blob {
			if err := addRef(blobs, hexSum, 1); err != nil {
				return err
			}
		}
		return s.pruneLocked(idx, recs, blobs, prefix, s.opts.Keep, &unref)
	})
	if err != nil {
		if c.Blob {
			s.dropIfUnreferencedLocked(hexSum)
		}
		return Checkpoint{}, fmt.Errorf("checkpoint: save %s/%s: %w", k.GroupID, k.WorkItemID, err)
	}
	s.removeBlobsLocked(unref)
	c.State = bytes.Clone(state)
	return c, nil
}

// pruneLocked deletes all but the newest keep index entries under prefix,
// their records and their blob references; blob files whose count drops to
// zero are appended to unref for removal after the commit.
func (s *Store) pruneLocked(idx, recs, blobs *bolt.Bucket, prefix []byte, keep int, unref *[]string) error {
	var doomed [][]byte
	c := idx.Cursor()
	n := 0
	for k, _ := lastWithPrefix(c, prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if n++; n > keep {
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	for _, k := range doomed {
		id := bytes.Clone(idx.Get(k))
		if rec := recs.Get(id); rec != nil {
			if cp, _, err := decodeRecord(rec); err == nil && cp.Blob {
				hexSum := cp.Digest[len("sha256:"):]
				if err := addRef(blobs, hexSum, -1); err != nil {
					return err
				}
				if blobs.Get([]byte(hexSum)) == nil {
					*unref = append(*unref, hexSum)
				}
			}
			if err := recs.Delete(id); err != nil {
				return err
			}
		}
		if err := idx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Latest returns the newest checkpoint of a WorkItem across ownership
// epochs (the highest epoch, then the highest seq), so an owner with a
// higher epoch resumes where the previous one stopped. ErrNotFound when
// there is none; ErrCorrupt (never the bytes) when its state fails its
// digest.
func (s *Store) Latest(group, item string) (Checkpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var c Checkpoint
	var inline []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		k, id := lastWithPrefix(root.Bucket(bktIndex).Cursor(), itemPrefix(group, item))
		if k == nil {
			return ErrNotFound
		}
		var err error
		c, inline, err = s.recordLocked(root, id)
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: latest of %s/%s: %w", group, item, err)
	}
	return s.withState(c, inline)
}

// Get returns the checkpoint id with its verified state.
func (s *Store) Get(id string) (Checkpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var c Checkpoint
	var inline []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, inline, err = s.recordLocked(tx.Bucket(bktRoot), []byte(id))
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: get %q: %w", id, err)
	}
	return s.withState(c, inline)
}

// List returns the checkpoints of a WorkItem oldest first, without state.
func (s *Store) List(group, item string) ([]Checkpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		prefix := itemPrefix(group, item)
		c := root.Bucket(bktIndex).Cursor()
		for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
			cp, _, err := s.recordLocked(root, id)
			if err != nil {
				return err
			}
			out = append(out, cp)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s/%s: %w", group, item, err)
	}
	return out, nil
}

// Delete removes every checkpoint of a finished WorkItem, in all epochs,
// and the blob files only they referenced. It returns how many went.
func (s *Store) Delete(group, item string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var unref []string
	var n int
	err := s.db.Update(func(tx *bolt.Tx) error {
		unref, n = unref[:0], 0
		root := tx.Bucket(bktRoot)
		idx := root.Bucket(bktIndex)
		prefix := itemPrefix(group, item)
		c := idx.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		return s.pruneLocked(idx, root.Bucket(bktRecords), root.Bucket(bktBlobs), prefix, 0, &unref)
	})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: delete %s/%s: %w", group, item, err)
	}
	s.removeBlobsLocked(unref)
	return n, nil
}

// recordLocked reads and decodes record id; inline aliases the tx's memory.
func (s *Store) recordLocked(root *bolt.Bucket, id []byte) (Checkpoint, []byte, error) {
	rec := root.Bucket(bktRecords).Get(id)
	if rec == nil {
		return Checkpoint{}, nil, ErrNotFound
	}
	c, inline, err := decodeRecord(rec)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.ID != string(id) {
		return Checkpoint{}, nil, fmt.Errorf("%w: record %q names itself %q", ErrCorrupt, id, c.ID)
	}
	return c, bytes.Clone(inline), nil
}

// withState attaches c's state after checking it against c.Digest. The
// caller holds mu shared.
func (s *Store) withState(c Checkpoint, inline []byte) (Checkpoint, error) {
	state := inline
	if c.Blob {
		var err error
		if state, err = s.readBlob(c.Digest[len("sha256:"):]); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint %q: %w", c.ID, err)
		}
	}
	if int64(len(state)) != c.Size || protocol.Digest(state) != c.Digest {
		return Checkpoint{}, fmt.Errorf("checkpoint %q: %w: state does not match %s", c.ID, ErrCorrupt, c.Digest)
	}
	c.State = state
	return c, nil
}

// lastWithPrefix positions c on the last key starting with prefix.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) (k, v []byte) {
	// Every key under prefix is prefix + 16 bytes, so prefix + 0xFF…
	// (17 bytes) sorts after all of them and before any other prefix.
	end := append(bytes.Clone(prefix), bytes.Repeat([]byte{0xFF}, 17)...)
	if k, v = c.Seek(end); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil, nil
	}
	return k, v
}

// addRef adjusts the reference count of blob hexSum, deleting it at zero.
func addRef(blobs *bolt.Bucket, hexSum string, d int) error {
	var n uint64
	if v := blobs.Get([]byte(hexSum)); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if d < 0 && n == 0 {
		return fmt.Errorf("%w: blob %s released more often than referenced", ErrCorrupt, hexSum)
	}
	n = uint64(int64(n) + int64(d))
	if n == 0 {
		return blobs.Delete([]byte(hexSum))
	}
	return blobs.Put([]byte(hexSum), binary.BigEndian.AppendUint64(nil, n))
}

// newID returns a fresh checkpoint id (a wire id).
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "cp-" + hex.EncodeToString(b[:])
}
