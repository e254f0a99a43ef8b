package queue

import (
	bolt "go.etcd.io/bbolt"
)

// RecentEventIDs is how many of a Group's last applied eventIds the store
// remembers to refuse an eventId reused under another sequence.
//
// Duplicates are found by sequence: an event is immutable and signed with
// its sequence, so a redelivery of an applied event always carries a
// sequence at or below the cursor. The same eventId under a new sequence is
// therefore not a duplicate but a different document: the authority
// equivocating. A durable eventId index would catch that at any distance,
// but authorities issue random ids and every commit would then dirty one
// index page per event, growing with the Group's history (docs/performance.md). A
// window of the latest ids, refilled from the inbox tail on Open, catches
// the realistic failure (a retry or replay path re-sequencing recent events)
// at a fixed cost.
const RecentEventIDs = 1024

// idWindow maps the last RecentEventIDs applied eventIds to their sequence.
type idWindow struct {
	seq  map[string]uint64
	ring []string
	next int
}

func (w *idWindow) get(id string) (uint64, bool) {
	seq, ok := w.seq[id]
	return seq, ok
}

func (w *idWindow) add(id string, seq uint64) {
	if w.seq == nil {
		w.seq = make(map[string]uint64, RecentEventIDs)
		w.ring = make([]string, 0, RecentEventIDs)
	}
	if _, ok := w.seq[id]; ok {
		return
	}
	if len(w.ring) < RecentEventIDs {
		w.ring = append(w.ring, id)
	} else {
		delete(w.seq, w.ring[w.next])
		w.ring[w.next] = id
		w.next = (w.next + 1) % RecentEventIDs
	}
	w.seq[id] = seq
}

// fillRecent loads the eventIds of the Group's last RecentEventIDs events,
// oldest first so the window evicts in sequence order: from the inbox
// tail, and, where the inbox was pruned, from the ids its pruned base
// kept for the window (prunedRecent).
func fillRecent(w *idWindow, gb *bolt.Bucket) error {
	inbox := gb.Bucket(bktInbox)
	if inbox == nil {
		return nil
	}
	var tail []recentRef
	c := inbox.Cursor()
	for k, v := c.Last(); k != nil && len(tail) < RecentEventIDs; k, v = c.Prev() {
		var ev struct {
			EventID string `json:"eventId"`
		}
		if err := unmarshal(v, &ev); err != nil {
			return err
		}
		tail = append(tail, recentRef{ev.EventID, getU64(k)})
	}
	if len(tail) < RecentEventIDs {
		kept, err := prunedRecent(gb.Bucket(bktPruned))
		if err != nil {
			return err
		}
		for i := len(kept) - 1; i >= 0 && len(tail) < RecentEventIDs; i-- {
			tail = append(tail, kept[i])
		}
	}
	for i := len(tail) - 1; i >= 0; i-- {
		w.add(tail[i].ID, tail[i].Seq)
	}
	return nil
}

// recentRef is one eventId of the window and its sequence.
type recentRef struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}
