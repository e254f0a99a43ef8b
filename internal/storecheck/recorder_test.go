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
