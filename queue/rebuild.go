package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Rebuild deletes the projection of the given Groups (every Group when none
// is given) and recomputes it by replaying the inbox over the restored
// snapshot, if any (spec 11.1: queues are rebuildable by replay). The result
// is byte-identical to the projection Apply maintained. Cursors, inboxes,
// buffers and the outbox are untouched.
func (s *Store) Rebuild(groupIDs ...string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	if len(groupIDs) == 0 {
		groupIDs = s.GroupIDs()
	}
	rebuilt := make(map[string]*groupState, len(groupIDs))
	err := s.update(func(tx *bolt.Tx) error {
		for _, id := range groupIDs {
			gb := tx.Bucket(bktGroups).Bucket([]byte(id))
			if gb == nil {
				return fmt.Errorf("queue: rebuild: unknown group %s", id)
			}
			if gb.Bucket(bktQueue) != nil {
				if err := gb.DeleteBucket(bktQueue); err != nil {
					return err
				}
			}
			meta := gb.Bucket(bktMeta)
			for _, k := range [][]byte{keyMission, keyMembers} {
				if err := meta.Delete(k); err != nil {
					return err
				}
			}
			g, ov, err := replay(gb, id)
			if err != nil {
				return err
			}
			queue, err := gb.CreateBucket(bktQueue)
			if err != nil {
				return err
			}
			if err := writeProjection(meta, queue, ov); err != nil {
				return err
			}
			ov.merge()
			rebuilt[id] = g
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: rebuild: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, g := range rebuilt {
		old := s.groups[id]
		g.buf, g.snapRef, g.recent = old.buf, old.snapRef, old.recent
		s.groups[id] = g
	}
	return nil
}

// replay recomputes a Group's projection from its meta and inbox. The
// returned overlay holds every entry (as changed) over the state the inbox
// replays onto: the pruned base, else the restored snapshot, else nothing.
func replay(gb *bolt.Bucket, id string) (*groupState, *overlay, error) {
	meta := gb.Bucket(bktMeta)
	g, err := baseState(gb, id)
	if err != nil {
		return nil, nil, err
	}
	g.base = getU64(meta.Get(keyBase))
	g.cursor = getU64(meta.Get(keyCursor))
	// The base state is the starting point; it counts as changed so the
	// queue bucket gets every entry.
	base := newGroupState(id)
	ov := newOverlay(base)
	ov.private = true
	start := change{items: sortedItems(g), members: sortedMembers(g.members)}
	if hasBaseMission(gb) {
		start.mission = &g.mis
	}
	ov.record(start)
	next, err := replayInboxTo(gb.Bucket(bktInbox), id, g.base+1, math.MaxUint64, ov)
	if err != nil {
		return nil, nil, fmt.Errorf("group %s %w", id, err)
	}
	if next-1 != g.cursor {
		return nil, nil, fmt.Errorf("group %s inbox ends at %d, cursor is %d", id, next-1, g.cursor)
	}
	base.cursor, base.base = g.cursor, g.base
	return base, ov, nil
}

func sortedItems(g *groupState) []*Entry {
	out := make([]*Entry, 0, len(g.items))
	for _, id := range slices.Sorted(maps.Keys(g.items)) {
		out = append(out, g.items[id])
	}
	return out
}

// inboxFact is a stored event's envelope as replay reads it: what the
// projection's result depends on. The eventId (named only in a problem's
// text, which replay drops), the actor and the causationId are left in the
// bytes, and the groupId is the Group's own (Apply stores an event in the
// inbox its groupId names). Payload is a json.RawMessage, or a pointer to
// the event type's payload for the one-pass decode.
type inboxFact struct {
	Sequence   uint64              `json:"sequence"`
	Type       protocol.EventType  `json:"type"`
	Aggregate  *protocol.Aggregate `json:"aggregate"`
	Revision   uint64              `json:"revision"`
	OccurredAt protocol.Time       `json:"occurredAt"`
	Payload    any                 `json:"payload"`
}

func (w *inboxFact) fact(groupID string) fact {
	return fact{GroupID: groupID, Seq: w.Sequence, Type: w.Type, Aggregate: w.Aggregate,
		Revision: w.Revision, OccurredAt: w.OccurredAt}
}

// replayInboxTo projects the inbox's events from sequence next through to,
// in order, and returns the sequence after the last. Decoding is most of the
// work and needs nothing but the event's bytes, so it runs ahead on every
// core (decodeAhead) of the one goroutine that projects.
func replayInboxTo(inbox *bolt.Bucket, groupID string, next, to uint64, ov *overlay) (uint64, error) {
	var jump, first error
	c := inbox.Cursor()
	k, v := c.Seek(u64(next))
	values := func() ([]byte, []byte, bool) {
		if k == nil || next > to {
			return nil, nil, false
		}
		if seq := getU64(k); seq != next {
			jump = fmt.Errorf("inbox jumps from %d to %d", next-1, seq)
			return nil, nil, false
		}
		rk, rv := k, v
		k, v = c.Next()
		next++
		return rk, rv, true
	}
	decode := func(k, v []byte) storedEvent { return decodeStored(groupID, k, v) }
	decodeAhead(values, decode, func(d storedEvent) {
		switch {
		case first != nil:
		case d.err != nil:
			first = fmt.Errorf("event %d: %w", d.seq, d.err)
		default:
			ov.record(d.project(ov))
		}
	})
	if first != nil {
		return 0, first
	}
	return next, jump
}

// storedEvent is a stored event decoded for the projection: its envelope
// and, when typed, its payload already in its type.
type storedEvent struct {
	seq     uint64
	err     error
	f       fact
	payload any
	typed   bool
}

// decodeStored decodes one stored event of the Group groupID. Replay is
// the cold-start path (docs/performance.md): the payload is decoded
// straight into its type in the same pass as the envelope when the type
// can be read off the stored bytes first; otherwise it is kept raw for
// project. An event of a type the view ignores changes nothing, so it is
// not decoded at all (Apply stored it only after verifying it).
func decodeStored(groupID string, key, raw []byte) storedEvent {
	seq := getU64(key)
	if typ, ok := trailingType(raw); ok {
		if !projected(typ) {
			return storedEvent{seq: seq, f: fact{Type: typ}}
		}
		if d, ok := canonicalFact(groupID, raw, typ); ok {
			d.seq = seq
			return d
		}
	}
	return decodeGeneral(groupID, seq, raw)
}

// decodeGeneral is decodeStored without the canonical fast path
// (canonicalFact).
func decodeGeneral(groupID string, seq uint64, raw []byte) storedEvent {
	if typ, ok := trailingType(raw); ok {
		if !projected(typ) {
			return storedEvent{seq: seq, f: fact{Type: typ}}
		}
		if p, ok := newPayload(typ); ok {
			w := inboxFact{Payload: p}
			if unmarshal(raw, &w) == nil && w.Type == typ {
				return storedEvent{seq: seq, f: w.fact(groupID), payload: payloadOf(p), typed: true}
			}
		}
	}
	var payload json.RawMessage
	w := inboxFact{Payload: &payload}
	if err := unmarshal(raw, &w); err != nil {
		return storedEvent{seq: seq, err: err}
	}
	d := storedEvent{seq: seq, f: w.fact(groupID)}
	d.f.Payload = payload
	return d
}

// project projects the event. Its result is the one Apply got: a payload
// the view cannot read (which Apply recorded as a Problem) changes nothing
// here either.
func (d *storedEvent) project(ov *overlay) change {
	if d.typed {
		ch, _ := projectPayload(ov, &d.f, d.payload)
		return ch
	}
	ch, _ := project(ov, &d.f)
	return ch
}

// trailingType reads the event type off canonical (JCS) event bytes, where
// "type" sorts after every other top-level member of an event: they end
// with "type":"<type>"}. Anything else answers false.
func trailingType(raw []byte) (protocol.EventType, bool) {
	if !bytes.HasSuffix(raw, []byte(`"}`)) {
		return "", false
	}
	body := raw[:len(raw)-2]
	i := lastIndexNear(body, []byte(`,"type":"`), 128)
	if i < 0 {
		return "", false
	}
	t := body[i+len(`,"type":"`):]
	if bytes.ContainsAny(t, `"\`) {
		return "", false
	}
	return protocol.EventType(t), true
}
