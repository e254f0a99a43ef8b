//go:build powerloss

package storecheck

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// In the powerloss build Open records every commit that returned.
func TestOpenRecordsCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 3 {
		var id int
		if err := db.Update(func(tx *bolt.Tx) error {
			id = int(tx.ID())
			_, err := tx.CreateBucketIfNotExists([]byte("k"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := LastCommitted(path); err != nil || got != uint64(id) {
			t.Fatalf("recorded %d (%v), want %d", got, err, id)
		}
	}
}

// The record is the newest transaction known to be on disk: a writer
// beginning its commit holds the lock, so the one before it has returned
// (bbolt logs "successfully" only after releasing the lock, when the next
// writer may already be reusing pages the older meta page names), and a
// late line never moves the record back.
func TestCommitRecordOrder(t *testing.T) {
	const begin, done = "Committing transaction %d", "Committing transaction %d successfully"
	path := filepath.Join(t.TempDir(), "x.db")
	opts := withCommitRecord(path, nil)
	r := opts.Logger.(*commitRecorder)
	for _, step := range []struct {
		format string
		txid   uint64
		want   uint64
	}{
		{begin, 45, 44},
		{begin, 46, 45}, // 45's "successfully" has not run yet
		{done, 45, 45},
		{done, 46, 46},
		{done, 45, 46}, // late
		{"Committing transaction failed: %v", 99, 46},
	} {
		r.Debugf(step.format, step.txid)
		if got, err := LastCommitted(path); err != nil || got != step.want {
			t.Fatalf("after %q %d: recorded %d (%v), want %d", step.format, step.txid, got, err, step.want)
		}
	}
}
