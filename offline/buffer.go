package offline

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// SchemaVersion is the layout of the offline bucket tree (doc.go).
const SchemaVersion = 1

// Default bounds of the buffer.
const (
	DefaultMaxCommands = 4096
	DefaultMaxBytes    = 16 << 20
)

// Limits bound the buffer by count and by the bytes of the buffered signed
// commands; zero fields take the defaults. Rebased copies are not counted:
// they replace the originals on the wire and are about the same size.
type Limits struct {
	MaxCommands int
	MaxBytes    int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxCommands <= 0 {
		l.MaxCommands = DefaultMaxCommands
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Errors of the buffer. ErrFull means "pause the slot and keep the command":
// the buffer never drops anything to make room.
var (
	ErrFull     = errors.New("offline: buffer full")
	ErrTooLarge = errors.New("offline: command larger than the whole buffer")
	ErrNotFound = errors.New("offline: no such buffered command")
	ErrSchema   = errors.New("offline: unsupported buffer schema version")
)

// Entry is one buffered command.
type Entry struct {
	ID       uint64 // append order; never reused
	ActionID string
	Type     protocol.CommandType
	GroupID  string
	Binding  protocol.OfflineBinding
	Signed   []byte   // as signed while offline
	Rebased  *Rebased // the last rebase persisted by Prepare, if any
}

// Rebased is a persisted rebase of an entry: the exact bytes sent, so a
// resend after a lost receipt is byte-identical.
type Rebased struct {
	SessionEpoch    uint64
	MembershipEpoch uint64
	IssuedAt        time.Time
	Raw             []byte
}

// Buffer is the durable, bounded, ordered buffer of signed commands in a
// bbolt file owned by someone else (queue.Store.DB()). Every write is one
// fsync'd commit. It is safe for concurrent use.
type Buffer struct {
	db  *bolt.DB
	lim Limits
}

var (
	bktRoot    = []byte("offline")
	bktMeta    = []byte("meta")
	bktEntries = []byte("entries")
	bktRebased = []byte("rebased")
	bktIndex   = []byte("index")
	keySchema  = []byte("schema")
	keyCount   = []byte("count")
	keyBytes   = []byte("bytes")
)

// OpenBuffer creates (if needed) and checks the buffer's buckets in db.
func OpenBuffer(db *bolt.DB, limits Limits) (*Buffer, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bktRoot)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bktMeta, bktEntries, bktRebased, bktIndex} {
			if _, err := root.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := root.Bucket(bktMeta)
		switch v := meta.Get(keySchema); {
		case v == nil:
			return meta.Put(keySchema, u64(SchemaVersion))
		case len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion:
			return fmt.Errorf("%w: %x", ErrSchema, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Buffer{db: db, lim: limits.withDefaults()}, nil
}

// Limits returns the effective bounds.
func (b *Buffer) Limits() Limits { return b.lim }

// Append durably buffers a signed command after the ones before it. The
// command must be a schema-valid agent Command of a bufferable type carrying
// a consistent offline binding (BindingOf). Appending the same bytes under
// the same actionId again returns the existing entry (a retry after a crash
// is harmless); other bytes under it are ACTION_ID_COLLISION. At either bound
// it returns ErrFull and buffers nothing.
func (b *Buffer) Append(signed []byte) (Entry, error) {
	e, err := parseBuffered(signed)
	if err != nil {
		return Entry{}, err
	}
	if int64(len(signed)) > b.lim.MaxBytes {
		return Entry{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(signed), b.lim.MaxBytes)
	}
	rec, err := encodeRecord(entryHeader{ActionID: e.ActionID, Type: e.Type, GroupID: e.GroupID, Binding: e.Binding}, signed)
	if err != nil {
		return Entry{}, err
	}
	err = b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		idx, ents, meta := root.Bucket(bktIndex), root.Bucket(bktEntries), root.Bucket(bktMeta)
		if k := idx.Get([]byte(e.ActionID)); k != nil {
			old, err := decodeEntry(k, ents.Get(k))
			if err != nil {
				return err
			}
			if !bytes.Equal(old.Signed, signed) {
				return protocol.Errorf(protocol.CodeActionIDCollision, "offline: actionId %s already buffers a different command", e.ActionID)
			}
			e.ID = old.ID
			return nil
		}
		count, size := getU64(meta, keyCount), getU64(meta, keyBytes)
		if count+1 > uint64(b.lim.MaxCommands) || size+uint64(len(signed)) > uint64(b.lim.MaxBytes) {
			return fmt.Errorf("%w: %d commands, %d bytes", ErrFull, count, size)
		}
		id, err := ents.NextSequence()
		if err != nil {
			return err
		}
		e.ID = id
		return errors.Join(ents.Put(u64(id), rec), idx.Put([]byte(e.ActionID), u64(id)),
			meta.Put(keyCount, u64(count+1)), meta.Put(keyBytes, u64(size+uint64(len(signed)))))
	})
	if err != nil {
		return Entry{}, err
	}
	e.Signed = slices.Clone(signed)
	return e, nil
}

// Pending returns every buffered command in append order, with its persisted
// rebase if any.
func (b *Buffer) Pending() ([]Entry, error) {
	var out []Entry
	err := b.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		reb := root.Bucket(bktRebased)
		return root.Bucket(bktEntries).ForEach(func(k, v []byte) error {
			e, err := decodeEntry(k, v)
			if err != nil {
				return err
			}
			if e.Rebased, err = decodeRebased(reb.Get(k)); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// Get returns one buffered command.
func (b *Buffer) Get(id uint64) (Entry, error) {
	var e Entry
	err := b.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		v := root.Bucket(bktEntries).Get(u64(id))
		if v == nil {
			return fmt.Errorf("%w: %d", ErrNotFound, id)
		}
		var err error
		if e, err = decodeEntry(u64(id), v); err != nil {
			return err
		}
		e.Rebased, err = decodeRebased(root.Bucket(bktRebased).Get(u64(id)))
		return err
	})
	return e, err
}

// Remove deletes a command the authority has answered for good (see
// Classify). Removing an unknown id does nothing, so it is safe to repeat.
func (b *Buffer) Remove(id uint64) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		ents, meta := root.Bucket(bktEntries), root.Bucket(bktMeta)
		k := u64(id)
		v := ents.Get(k)
		if v == nil {
			return nil
		}
		e, err := decodeEntry(k, v)
		if err != nil {
			return err
		}
		count, size := getU64(meta, keyCount), getU64(meta, keyBytes)
		if count == 0 || size < uint64(len(e.Signed)) {
			return fmt.Errorf("offline: buffer counters %d/%d below entry %d", count, size, id)
		}
		return errors.Join(ents.Delete(k), root.Bucket(bktRebased).Delete(k), root.Bucket(bktIndex).Delete([]byte(e.ActionID)),
			meta.Put(keyCount, u64(count-1)), meta.Put(keyBytes, u64(size-uint64(len(e.Signed)))))
	})
}

// Len returns how many commands and signed bytes are buffered.
func (b *Buffer) Len() (commands int, size int64, err error) {
	err = b.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktRoot).Bucket(bktMeta)
		commands, size = int(getU64(meta, keyCount)), int64(getU64(meta, keyBytes))
		return nil
	})
	return commands, size, err
}

// parseBuffered checks a signed command the way the authority's pipeline
// would before any state (the signature value is only required, not
// verified: it is our own), so nothing the authority must refuse as
// malformed is ever buffered.
func parseBuffered(signed []byte) (Entry, error) {
	v, err := protocol.Parse(signed, protocol.DecodeOptions{})
	if err != nil {
		return Entry{}, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return Entry{}, protocol.Errorf(protocol.CodeProtocolViolation, "a Command must be a JSON object")
	}
	for _, check := range []func(map[string]any) error{
		protocol.CheckCommandSigner,
		func(d map[string]any) error { return protocol.CheckCommandEpochs(d) },
		func(d map[string]any) error { return protocol.Validate("command", d) },
		func(d map[string]any) error { return protocol.CheckExtensions(d, protocol.KnownExtension) },
	} {
		if err := check(doc); err != nil {
			return Entry{}, err
		}
	}
	var cmd protocol.Command
	if err := protocol.DecodeExactParsed(signed, v, &cmd, protocol.CodeSchemaValidationFailed); err != nil {
		return Entry{}, err
	}
	bind, err := BindingOf(&cmd)
	if err != nil {
		return Entry{}, err
	}
	return Entry{ActionID: cmd.ActionID, Type: cmd.Type, GroupID: cmd.GroupID, Binding: bind}, nil
}

// Records are uvarint(len(header)) header(JSON) payload bytes: the signed
// bytes follow unchanged (JSON would re-escape them).
type entryHeader struct {
	ActionID string                  `json:"actionId"`
	Type     protocol.CommandType    `json:"type"`
	GroupID  string                  `json:"groupId"`
	Binding  protocol.OfflineBinding `json:"binding"`
}

type rebasedHeader struct {
	SessionEpoch    uint64        `json:"sessionEpoch"`
	MembershipEpoch uint64        `json:"membershipEpoch"`
	IssuedAt        protocol.Time `json:"issuedAt"`
}

func encodeRecord(hdr any, payload []byte) ([]byte, error) {
	h, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	rec := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(h)+len(payload)), uint64(len(h)))
	return append(append(rec, h...), payload...), nil
}

func splitRecord(v []byte, hdr any) ([]byte, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return nil, errors.New("offline: corrupt record")
	}
	if err := json.Unmarshal(v[k:k+int(n)], hdr); err != nil {
		return nil, fmt.Errorf("offline: corrupt record header: %w", err)
	}
	return slices.Clone(v[k+int(n):]), nil
}

func decodeEntry(k, v []byte) (Entry, error) {
	var h entryHeader
	signed, err := splitRecord(v, &h)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %x: %w", k, err)
	}
	if len(k) != 8 {
		return Entry{}, fmt.Errorf("offline: entry key %x is not a uint64", k)
	}
	return Entry{ID: binary.BigEndian.Uint64(k), ActionID: h.ActionID, Type: h.Type, GroupID: h.GroupID, Binding: h.Binding, Signed: signed}, nil
}

func decodeRebased(v []byte) (*Rebased, error) {
	if v == nil {
		return nil, nil
	}
	var h rebasedHeader
	raw, err := splitRecord(v, &h)
	if err != nil {
		return nil, err
	}
	return &Rebased{SessionEpoch: h.SessionEpoch, MembershipEpoch: h.MembershipEpoch, IssuedAt: h.IssuedAt.Time, Raw: raw}, nil
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func getU64(b *bolt.Bucket, k []byte) uint64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
