package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// openDB opens dir/worker.db; the bbolt consistency check runs when the
// test ends.
func openDB(t testing.TB, dir string, noSync bool) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "worker.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, db) })
	return db
}

func closeChecked(t testing.TB, db *bolt.DB) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		return first
	})
	if err != nil && !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Errorf("bbolt check: %v", err)
	}
	db.Close()
}

func openStore(t testing.TB, opts Options) (*Store, *bolt.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db := openDB(t, dir, true)
	s, err := OpenOptions(db, filepath.Join(dir, "blobs"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, db, dir
}

// gen returns deterministic state bytes of about n bytes for step i.
func gen(i, n int) []byte {
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = fmt.Appendf(b, "%d|", i)
	}
	return b[:n]
}

func mustSave(t testing.TB, s *Store, k Key, meta Meta, state []byte) Checkpoint {
	t.Helper()
	c, err := s.Save(k, t0, meta, state)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
