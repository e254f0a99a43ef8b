package checkpoint

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// DeleteGroup removes every checkpoint of every WorkItem of a Group the
// worker forgot (its Mission over, nothing of the worker in it), and the
// blob files only they referenced. The records and references go in one
// transaction; the files are removed only after it committed, so a crash
// never leaves a record naming a missing blob (an orphaned file is removed
// by the next Open's GC). It returns how many checkpoints went.
func (s *Store) DeleteGroup(group string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var unref []string
	var n int
	prefix := append([]byte(group), 0)
	err := s.db.Update(func(tx *bolt.Tx) error {
		unref, n = unref[:0], 0
		root := tx.Bucket(bktRoot)
		idx := root.Bucket(bktIndex)
		c := idx.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		return s.pruneLocked(idx, root.Bucket(bktRecords), root.Bucket(bktBlobs), prefix, 0, &unref)
	})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: delete group %s: %w", group, err)
	}
	s.removeBlobsLocked(unref)
	return n, nil
}
