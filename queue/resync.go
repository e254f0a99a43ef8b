package queue

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ResetGroup forgets everything the store holds of a Group — its inbox,
// cursor, projection, memberships, restored snapshot and divergence — and
// keeps the Group itself, empty, so the next subscription replays it from
// the authority's log (or restores the authority's signed snapshot when the
// log no longer starts at 1). This is the operator's resync of a diverged
// Group (Divergence), and the way to rebuild one Group from the authority.
// It returns the cursor the Group had.
func (s *Store) ResetGroup(groupID string) (uint64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return 0, ErrClosed
	}
	s.mu.RLock()
	old, ok := s.groups[groupID]
	s.mu.RUnlock()
	if !ok {
		return 0, fmt.Errorf("queue: reset: unknown group %s", groupID)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktGroups).DeleteBucket([]byte(groupID)); err != nil {
			return err
		}
		_, _, _, _, err := groupBuckets(tx, groupID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue: reset %s: %w", groupID, err)
	}
	s.mu.Lock()
	s.groups[groupID] = newGroupState(groupID)
	s.mu.Unlock()
	return old.cursor, nil
}
