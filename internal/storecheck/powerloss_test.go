package storecheck

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// writeCommits makes a bbolt file with keys a, b and c, one commit each,
// and returns its path and the txid of each commit.
func writeCommits(t *testing.T) (string, []uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []uint64
	for _, k := range []string{"a", "b", "c"} {
		err := db.Update(func(tx *bolt.Tx) error {
			ids = append(ids, uint64(tx.ID()))
			b, err := tx.CreateBucketIfNotExists([]byte("k"))
			if err != nil {
				return err
			}
			return b.Put([]byte(k), []byte(k))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return path, ids
}

func record(t *testing.T, path string, txid uint64) {
	t.Helper()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], txid)
	if err := os.WriteFile(path+CommittedSuffix, b[:], 0o600); err != nil {
		t.Fatal(err)
	}
}

func keys(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("k")).ForEach(func(k, _ []byte) error { out += string(k); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Only the newest commit can be lost, and only when its Commit had not
// returned (the record is older); the file then opens sound at the
// commit before it.
func TestLosePower(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded int // index of the last recorded commit; -1: none
		keep     bool
		lost     bool
		want     string
	}{
		{"newest commit returned", 2, false, false, "abc"},
		{"newest commit not returned", 1, false, true, "ab"},
		{"no record", -1, false, true, "ab"},
		{"not returned, but it reached the disk", 1, true, false, "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, ids := writeCommits(t)
			if tc.recorded >= 0 {
				record(t, path, ids[tc.recorded])
			}
			txid, lost, err := LosePower(path, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			if lost != tc.lost {
				t.Fatalf("lost %v, want %v", lost, tc.lost)
			}
			if got := keys(t, path); got != tc.want {
				t.Fatalf("keys %q after the power loss, want %q", got, tc.want)
			}
			m, err := ReadMeta(path)
			if err != nil {
				t.Fatal(err)
			}
			if m.Txid() != txid || len(m.Problems()) > 0 {
				t.Fatalf("opens at %d (reported %d), problems %v", m.Txid(), txid, m.Problems())
			}
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.View(func(tx *bolt.Tx) error {
				if p := Structure(tx); len(p) > 0 {
					t.Errorf("structure after the power loss: %v", p)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
