package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"time"

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

// OutboxPut is a signed Command to record in the outbox before it is sent
// (Batch.Puts). NewOutboxPut builds one from the Command's bytes.
type OutboxPut struct {
	ActionID string
	Type     protocol.CommandType
	GroupID  string
	// IssuedAt is the Command's issuedAt (zero when absent or unreadable),
	// read here for the sender's freshness check; it is not stored apart
	// from the bytes.
	IssuedAt time.Time
	Signed   []byte
}

// NewOutboxPut reads a signed Command's actionId, type, groupId and
// issuedAt: the bytes must be a JSON object with a non-empty actionId.
// Callers build it off the committing goroutine, so the parse does not
// hold a commit up.
func NewOutboxPut(signed []byte) (OutboxPut, error) {
	doc, err := protocol.Parse(signed, protocol.DecodeOptions{})
	if err != nil {
		return OutboxPut{}, err
	}
	m, _ := doc.(map[string]any)
	if m == nil {
		return OutboxPut{}, protocol.Errorf(protocol.CodeInvalidCommand, "outbox: a Command must be a JSON object")
	}
	p := OutboxPut{Signed: signed}
	p.ActionID, _ = m["actionId"].(string)
	if p.ActionID == "" {
		return OutboxPut{}, protocol.Errorf(protocol.CodeInvalidCommand, "a Command needs an actionId").At("/actionId")
	}
	t, _ := m["type"].(string)
	p.Type = protocol.CommandType(t)
	p.GroupID, _ = m["groupId"].(string)
	at, _ := m["issuedAt"].(string)
	p.IssuedAt, _ = time.Parse(time.RFC3339Nano, at) // none: no freshness check
	return p, nil
}

// PutRefusal is an outbox put Commit refused.
type PutRefusal struct {
	ActionID string
	Err      *protocol.Error
}

// PutOutbox durably records a signed Command before it is sent. Putting the
// same actionId with the same bytes again is a no-op; with different bytes
// it is ACTION_ID_COLLISION, as at the authority. The bytes must be a JSON
// Command whose actionId is actionID. It is Commit with one put.
func (s *Store) PutOutbox(actionID string, signed []byte) error {
	p, err := NewOutboxPut(signed)
	if err != nil {
		return err
	}
	if p.ActionID != actionID {
		return protocol.Errorf(protocol.CodeInvalidCommand, "outbox: Command actionId %q does not match %q", p.ActionID, actionID).At("/actionId")
	}
	res, err := s.Commit(Batch{Puts: []OutboxPut{p}})
	if err != nil {
		return err
	}
	if len(res.PutRefused) > 0 {
		return res.PutRefused[0].Err
	}
	return nil
}

// AckOutbox removes an answered Command (an ACK receipt or an ERROR that
// needs a new Command). Unknown actionIds are ignored: Apply already removes
// a Command when an event caused by it arrives. It is Commit with one
// removal.
func (s *Store) AckOutbox(actionID string) error {
	_, err := s.Commit(Batch{Answered: []string{actionID}})
	return err
}

// outboxRec is a put ready for the transaction: its key in outboxIndex
// and its record.
type outboxRec struct {
	actionID string
	rec      []byte
}

// outboxChanges sorts a batch's outbox work before the transaction, from
// the actionIds the outbox holds (s.outbox): removals of what it does not
// hold are dropped, and a put of an actionId it holds is a no-op with the
// same bytes and refused with others (in res). So a batch of nothing but
// such work opens no transaction. s.wmu must be held.
func (s *Store) outboxChanges(b Batch, res *Result) ([]outboxRec, []string, error) {
	var acks []string
	for _, id := range b.Answered {
		if s.outbox[id] && !slices.Contains(acks, id) {
			acks = append(acks, id)
		}
	}
	var puts []outboxRec
	var known []OutboxPut
	for _, p := range b.Puts {
		if s.outbox[p.ActionID] {
			known = append(known, p)
			continue
		}
		if slices.ContainsFunc(puts, func(r outboxRec) bool { return r.actionID == p.ActionID }) {
			known = append(known, p) // twice in one batch: checked below
			continue
		}
		meta := outboxMeta{ActionID: p.ActionID, Type: p.Type, GroupID: p.GroupID, PutAt: protocol.NewTime(s.opts.Clock.Now())}
		hdr, err := json.Marshal(meta)
		if err != nil {
			return nil, nil, err
		}
		rec := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(hdr)+len(p.Signed)), uint64(len(hdr)))
		puts = append(puts, outboxRec{actionID: p.ActionID, rec: append(append(rec, hdr...), p.Signed...)})
	}
	if len(known) == 0 {
		return puts, acks, nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		idx, ob := tx.Bucket(bktOutboxIndex), tx.Bucket(bktOutbox)
		for _, p := range known {
			var old []byte
			if k := idx.Get([]byte(p.ActionID)); k != nil {
				e, err := decodeOutbox(ob.Get(k))
				if err != nil {
					return err
				}
				old = e.Signed
			} else if i := slices.IndexFunc(puts, func(r outboxRec) bool { return r.actionID == p.ActionID }); i >= 0 {
				e, err := decodeOutbox(puts[i].rec)
				if err != nil {
					return err
				}
				old = e.Signed
			}
			if !bytes.Equal(old, p.Signed) {
				res.PutRefused = append(res.PutRefused, PutRefusal{ActionID: p.ActionID,
					Err: protocol.Errorf(protocol.CodeActionIDCollision, "outbox: actionId %s already holds a different Command", p.ActionID)})
			}
		}
		return nil
	})
	return puts, acks, err
}

// writeOutbox adds the puts and removes the answered Commands.
func writeOutbox(tx *bolt.Tx, puts []outboxRec, acks []string) error {
	for _, id := range acks {
		if err := ackOutboxTx(tx, id); err != nil {
			return err
		}
	}
	idx, ob := tx.Bucket(bktOutboxIndex), tx.Bucket(bktOutbox)
	for _, p := range puts {
		n, err := ob.NextSequence()
		if err != nil {
			return err
		}
		if err := ob.Put(u64(n), p.rec); err != nil {
			return err
		}
		if err := idx.Put([]byte(p.actionID), u64(n)); err != nil {
			return err
		}
	}
	return nil
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

// settleOutbox makes s.outbox match a committed batch. s.mu must be held
// for writing.
func (s *Store) settleOutbox(puts []outboxRec, acks, answered []string) {
	for _, p := range puts {
		s.outbox[p.actionID] = true
	}
	for _, id := range acks {
		delete(s.outbox, id)
	}
	for _, id := range answered {
		delete(s.outbox, id)
	}
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
