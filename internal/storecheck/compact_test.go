package storecheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bloated writes a store whose most keys were deleted: its file keeps the
// freed pages.
func bloated(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1000)
	for round := range 4 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("events"))
			if err != nil {
				return err
			}
			for i := range 1000 {
				if err := b.Put(fmt.Appendf(nil, "%d-%05d", round, i), val); err != nil {
					return err
				}
			}
			_, err = b.NextSequence()
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("events")).Cursor()
		for k, _ := c.First(); k != nil && k[0] != '3'; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// contents is every key of the store and the bucket's sequence.
func contents(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out string
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("events"))
		out = fmt.Sprintf("seq %d", b.Sequence())
		return b.ForEach(func(k, v []byte) error { out += fmt.Sprintf(" %s:%d", k, len(v)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactFile: the file shrinks to what is live and holds the same
// keys; a store in use is refused and left alone; a failure before the
// swap (a crash, as far as the files are concerned) keeps the original,
// which then opens and compacts as before; a stale copy is removed.
func TestCompactFile(t *testing.T) {
	cases := []struct {
		name   string
		hold   bool
		fail   bool
		stale  bool
		wantIn error
	}{
		{name: "stopped store"},
		{name: "stale copy from a crashed run", stale: true},
		{name: "held by another opener", hold: true, wantIn: ErrInUse},
		{name: "failure before the swap", fail: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := bloated(t)
			want := contents(t, path)
			before, _ := os.Stat(path)
			if tc.stale {
				if err := os.WriteFile(path+".compact", []byte("half a copy"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.hold {
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
			}
			var after func(string) error
			if tc.fail {
				after = func(string) error { return errors.New("power lost") }
			}
			res, err := CompactFile(path, 50*time.Millisecond, after)
			if _, serr := os.Stat(path + ".compact"); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the copy is left beside the store: %v", serr)
			}
			if tc.hold || tc.fail {
				if err == nil || (tc.wantIn != nil && !errors.Is(err, tc.wantIn)) {
					t.Fatalf("err %v, want a refusal", err)
				}
				if now, _ := os.Stat(path); now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
					t.Fatal("the original changed")
				}
				if tc.hold {
					return
				}
				// The kept original compacts as before.
				if res, err = CompactFile(path, time.Second, nil); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if res.Before != before.Size() || res.After >= res.Before/2 {
				t.Fatalf("sizes %d -> %d, want less than half", res.Before, res.After)
			}
			if got := contents(t, path); got != want {
				t.Fatalf("contents after compaction differ:\n got %.200s\nwant %.200s", got, want)
			}
		})
	}
}
