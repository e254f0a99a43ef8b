package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Damaged state is reported as ErrCorrupt, never returned.
func TestCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		damage func(t *testing.T, s *Store, db *bolt.DB, blobDir string, c Checkpoint)
	}{
		{"flipped blob byte", 64 << 10, func(t *testing.T, _ *Store, _ *bolt.DB, dir string, c Checkpoint) {
			flipByte(t, filepath.Join(dir, c.Digest[7:]), 40000)
		}},
		{"truncated blob", 64 << 10, func(t *testing.T, _ *Store, _ *bolt.DB, dir string, c Checkpoint) {
			if err := os.Truncate(filepath.Join(dir, c.Digest[7:]), 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing blob", 64 << 10, func(t *testing.T, _ *Store, _ *bolt.DB, dir string, c Checkpoint) {
			if err := os.Remove(filepath.Join(dir, c.Digest[7:])); err != nil {
				t.Fatal(err)
			}
		}},
		{"blob replaced by another valid blob", 64 << 10, func(t *testing.T, _ *Store, _ *bolt.DB, dir string, c Checkpoint) {
			if err := os.WriteFile(filepath.Join(dir, c.Digest[7:]), gen(99, 64<<10), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"flipped inline byte", 500, func(t *testing.T, _ *Store, db *bolt.DB, _ string, c Checkpoint) {
			rewriteRecord(t, db, c.ID, func(rec []byte) []byte {
				rec[len(rec)-10] ^= 0x40
				return rec
			})
		}},
		{"inline state cut", 500, func(t *testing.T, _ *Store, db *bolt.DB, _ string, c Checkpoint) {
			rewriteRecord(t, db, c.ID, func(rec []byte) []byte { return rec[:len(rec)-1] })
		}},
		{"header garbage", 500, func(t *testing.T, _ *Store, db *bolt.DB, _ string, c Checkpoint) {
			rewriteRecord(t, db, c.ID, func(rec []byte) []byte {
				rec[3] = '!'
				return rec
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db, dir := openStore(t, Options{InlineMax: 1024})
			k := Key{"g", "w", 1}
			c := mustSave(t, s, k, Meta{}, gen(5, tc.size))
			tc.damage(t, s, db, filepath.Join(dir, "blobs"), c)
			for name, get := range map[string]func() (Checkpoint, error){
				"latest": func() (Checkpoint, error) { return s.Latest("g", "w") },
				"get":    func() (Checkpoint, error) { return s.Get(c.ID) },
			} {
				got, err := get()
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: err %v, want ErrCorrupt", name, err)
				}
				if got.State != nil {
					t.Fatalf("%s returned state with an error", name)
				}
			}
		})
	}
}

// A flipped byte in one checkpoint does not affect the others.
func TestCorruptionIsLocal(t *testing.T) {
	s, _, dir := openStore(t, Options{InlineMax: 1024, Keep: 5})
	old := mustSave(t, s, Key{"g", "w", 1}, Meta{}, gen(1, 4096))
	cur := mustSave(t, s, Key{"g", "w", 1}, Meta{}, gen(2, 4096))
	flipByte(t, filepath.Join(dir, "blobs", cur.Digest[7:]), 0)
	if _, err := s.Latest("g", "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("latest: %v", err)
	}
	got, err := s.Get(old.ID)
	if err != nil || !bytes.Equal(got.State, old.State) {
		t.Fatalf("older checkpoint: %v", err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func rewriteRecord(t *testing.T, db *bolt.DB, id string, f func([]byte) []byte) {
	t.Helper()
	err := db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket(bktRoot).Bucket(bktRecords)
		return recs.Put([]byte(id), f(bytes.Clone(recs.Get([]byte(id)))))
	})
	if err != nil {
		t.Fatal(err)
	}
}
