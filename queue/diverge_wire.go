package queue

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// OverlapEvents is how many applied events a subscription asks the
// authority to send again (ReplayAfter), so that each of them is compared
// with the stored bytes (compareApplied): an authority restored from an
// older copy that has since issued other events under those sequences is
// caught before anything after the cursor is applied. The inbox must keep
// at least this many of its newest events for the check to see them; it
// uses fewer when fewer are stored (a restored snapshot, a pruned inbox).
const OverlapEvents = 4

// ReplayAfter is the position to subscribe a Group from: its cursor minus
// the newest OverlapEvents events the inbox holds without a hole (none
// below a restored snapshot's base), so the authority sends those again
// and Apply compares them. It is the cursor when the inbox holds none of
// them, and 0 for an unknown Group.
func (s *Store) ReplayAfter(groupID string) uint64 {
	cursor := s.Cursor(groupID)
	if cursor == 0 {
		return 0
	}
	after := cursor
	_ = s.view(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(groupID))
		if gb == nil {
			return nil
		}
		inbox := gb.Bucket(bktInbox)
		for seq := cursor; seq > 0 && cursor-seq < OverlapEvents && inbox.Get(u64(seq)) != nil; seq-- {
			after = seq - 1
		}
		return nil
	})
	return after
}

// MarkAhead records that the Group's authority holds no event after last
// while this store applied events up to a higher cursor: the authority's
// log is not the one the worker followed (restored from an older copy), so
// the Group diverged at last+1. It returns the divergence and whether it is
// new; a Group already diverged keeps its first record, and one whose
// cursor is not past last is left alone (false, nothing recorded). The
// Group's events held beyond a gap are dropped: none of them will apply.
func (s *Store) MarkAhead(groupID string, last uint64) (Divergence, bool, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return Divergence{}, false, ErrClosed
	}
	s.mu.RLock()
	g := s.groups[groupID]
	var prev *Divergence
	var cursor uint64
	if g != nil {
		prev, cursor = g.diverged, g.cursor
	}
	s.mu.RUnlock()
	switch {
	case g == nil:
		return Divergence{}, false, fmt.Errorf("queue: mark diverged: unknown group %s", groupID)
	case prev != nil:
		return *prev, false, nil
	case cursor <= last:
		return Divergence{}, false, nil
	}
	d := Divergence{GroupID: groupID, Sequence: last + 1, AuthorityLastSequence: &last,
		DetectedAt: protocol.NewTime(s.opts.Clock.Now())}
	err := s.update(func(tx *bolt.Tx) error {
		if gb := tx.Bucket(bktGroups).Bucket([]byte(groupID)); gb != nil {
			if raw := gb.Bucket(bktInbox).Get(u64(last + 1)); raw != nil {
				d.StoredEventID = storedEventID(raw)
			}
		}
		return putDivergence(tx, &d)
	})
	if err != nil {
		return Divergence{}, false, fmt.Errorf("queue: mark diverged %s: %w", groupID, err)
	}
	s.mu.Lock()
	g.diverged = &d
	g.buf.dropThrough(^uint64(0))
	s.mu.Unlock()
	return d, true, nil
}
