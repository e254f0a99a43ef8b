package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// OutboxEntry is a Command sent and not yet answered.
type OutboxEntry struct {
	ActionID string               `json:"actionId"`
	Type     protocol.CommandType `json:"type,omitempty"`
	GroupID  string               `json:"groupId,omitempty"`
	PutAt    protocol.Time        `json:"putAt"`
	// Signed is the Command exactly as first sent; a resend after a
	// restart uses these bytes so the authority sees the same actionId and
	// content (spec 15.1) and returns the original receipt.
	Signed []byte `json:"-"`
}

// outboxMeta is the JSON header of an outbox record; the signed bytes
// follow it unchanged (JSON would re-escape them).
type outboxMeta struct {
	ActionID string               `json:"actionId"`
	Type     protocol.CommandType `json:"type,omitempty"`
	GroupID  string               `json:"groupId,omitempty"`
	PutAt    protocol.Time        `json:"putAt"`
}

// PutOutbox durably records a signed Command before it is sent. Putting the
// same actionId with the same bytes again is a no-op; with different bytes
// it is ACTION_ID_COLLISION, as at the authority. The bytes must be a JSON
// Command whose actionId is actionID.
func (s *Store) PutOutbox(actionID string, signed []byte) error {
	doc, err := protocol.Parse(signed, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	m, _ := doc.(map[string]any)
	if m == nil {
		return protocol.Errorf(protocol.CodeInvalidCommand, "outbox: a Command must be a JSON object")
	}
	if id, _ := m["actionId"].(string); id != actionID || actionID == "" {
		return protocol.Errorf(protocol.CodeInvalidCommand, "outbox: Command actionId %q does not match %q", m["actionId"], actionID).At("/actionId")
	}
	meta := outboxMeta{ActionID: actionID, PutAt: protocol.NewTime(s.opts.Clock.Now())}
	if t, ok := m["type"].(string); ok {
		meta.Type = protocol.CommandType(t)
	}
	if g, ok := m["groupId"].(string); ok {
		meta.GroupID = g
	}
	hdr, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	rec := binary.AppendUvarint(nil, uint64(len(hdr)))
	rec = append(append(rec, hdr...), signed...)

	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	return s.update(func(tx *bolt.Tx) error {
		idx, ob := tx.Bucket(bktOutboxIndex), tx.Bucket(bktOutbox)
		if k := idx.Get([]byte(actionID)); k != nil {
			old, err := decodeOutbox(ob.Get(k))
			if err != nil {
				return err
			}
			if bytes.Equal(old.Signed, signed) {
				return nil
			}
			return protocol.Errorf(protocol.CodeActionIDCollision, "outbox: actionId %s already holds a different Command", actionID)
		}
		n, err := ob.NextSequence()
		if err != nil {
			return err
		}
		if err := ob.Put(u64(n), rec); err != nil {
			return err
		}
		return idx.Put([]byte(actionID), u64(n))
	})
}

// AckOutbox removes an answered Command (an ACK receipt or an ERROR that
// needs a new Command). Unknown actionIds are ignored: Apply already removes
// a Command when an event caused by it arrives.
func (s *Store) AckOutbox(actionID string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	return s.update(func(tx *bolt.Tx) error { return ackOutboxTx(tx, actionID) })
}

func ackOutboxTx(tx *bolt.Tx, actionID string) error {
	idx := tx.Bucket(bktOutboxIndex)
	k := idx.Get([]byte(actionID))
	if k == nil {
		return nil
	}
	if err := tx.Bucket(bktOutbox).Delete(k); err != nil {
		return err
	}
	return idx.Delete([]byte(actionID))
}

// Outbox yields the pending Commands in the order they were put. It reads
// them all in one read transaction first, so the loop body may call
// PutOutbox or AckOutbox.
func (s *Store) Outbox() iter.Seq2[OutboxEntry, error] {
	return func(yield func(OutboxEntry, error) bool) {
		entries, err := readOutbox(s.db)
		if err != nil {
			yield(OutboxEntry{}, err)
			return
		}
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func readOutbox(db *bolt.DB) ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := storecheck.Guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bktOutbox).ForEach(func(k, v []byte) error {
				e, err := decodeOutbox(v)
				if err != nil {
					return fmt.Errorf("queue: outbox record %x: %w", k, err)
				}
				e.Signed = slices.Clone(e.Signed)
				out = append(out, e)
				return nil
			})
		})
	})
	if storecheck.IsPanic(err) {
		return nil, damaged(db.Path(), err)
	}
	return out, err
}

func decodeOutbox(v []byte) (OutboxEntry, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return OutboxEntry{}, fmt.Errorf("queue: corrupt outbox record")
	}
	var m outboxMeta
	if err := json.Unmarshal(v[k:k+int(n)], &m); err != nil {
		return OutboxEntry{}, err
	}
	return OutboxEntry{ActionID: m.ActionID, Type: m.Type, GroupID: m.GroupID, PutAt: m.PutAt, Signed: v[k+int(n):]}, nil
}
