package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestSaveLatestGet(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		blob bool
	}{
		{"empty", 0, false},
		{"inline", 100, false},
		{"at-threshold", 1024, false},
		{"blob", 1025, true},
		{"large-blob", 300 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, dir := openStore(t, Options{InlineMax: 1024})
			k := Key{"grp-a", "wi-1", 3}
			state := gen(7, tc.size)
			c := mustSave(t, s, k, Meta{Phase: "build", Note: "after compile"}, state)
			if c.Blob != tc.blob || c.Seq != 1 || c.Digest != protocol.Digest(state) || c.Size != int64(tc.size) {
				t.Fatalf("saved %+v", c)
			}
			if !validID(c.ID) {
				t.Fatalf("id %q is not a wire id", c.ID)
			}
			for name, get := range map[string]func() (Checkpoint, error){
				"latest": func() (Checkpoint, error) { return s.Latest("grp-a", "wi-1") },
				"get":    func() (Checkpoint, error) { return s.Get(c.ID) },
			} {
				got, err := get()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(got.State, state) || got.ID != c.ID || got.Key != k || got.Meta != c.Meta || !got.At.Equal(t0) {
					t.Fatalf("%s: got %+v", name, got)
				}
			}
			files, _ := os.ReadDir(filepath.Join(dir, "blobs"))
			if (len(files) == 1) != tc.blob {
				t.Fatalf("%d blob files for blob=%v", len(files), tc.blob)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	s, _, _ := openStore(t, Options{})
	mustSave(t, s, Key{"g", "a", 1}, Meta{}, []byte("x"))
	if _, err := s.Latest("g", "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of another item: %v", err)
	}
	// "g"/"a" must not be found under the prefix-sharing group "g" item "a2".
	if _, err := s.Latest("g", "a2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of a prefix-sharing item: %v", err)
	}
	if _, err := s.Get("cp-nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
}

// Latest spans ownership epochs, so a reassigned owner resumes; an older
// epoch can no longer write.
func TestEpochs(t *testing.T) {
	s, _, _ := openStore(t, Options{Keep: 10})
	mustSave(t, s, Key{"g", "w", 1}, Meta{Phase: "e1a"}, []byte("1a"))
	mustSave(t, s, Key{"g", "w", 1}, Meta{Phase: "e1b"}, []byte("1b"))
	got, err := s.Latest("g", "w")
	if err != nil || string(got.State) != "1b" || got.Seq != 2 {
		t.Fatalf("latest %+v %v", got, err)
	}
	// The new owner (epoch 2) resumes from epoch 1's last checkpoint...
	c := mustSave(t, s, Key{"g", "w", 2}, Meta{Phase: "e2"}, append(got.State, '+'))
	if c.Seq != 3 {
		t.Fatalf("seq %d, want 3 (numbered across epochs)", c.Seq)
	}
	// ...and the old owner is fenced.
	_, err = s.Save(Key{"g", "w", 1}, t0, Meta{}, []byte("late"))
	if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership {
		t.Fatalf("stale save: %v", err)
	}
	got, err = s.Latest("g", "w")
	if err != nil || string(got.State) != "1b+" || got.Key.OwnershipEpoch != 2 {
		t.Fatalf("latest after fence %+v %v", got, err)
	}
	list, err := s.List("g", "w")
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, c := range list {
		if c.State != nil {
			t.Fatal("List returned state")
		}
		phases = append(phases, c.Phase)
	}
	if !slices.Equal(phases, []string{"e1a", "e1b", "e2"}) {
		t.Fatalf("list order %v", phases)
	}
}

func TestInvalidInput(t *testing.T) {
	s, _, _ := openStore(t, Options{})
	for _, tc := range []struct {
		name string
		k    Key
		m    Meta
	}{
		{"empty group", Key{"", "w", 1}, Meta{}},
		{"nul in item", Key{"g", "w\x00x", 1}, Meta{}},
		{"slash", Key{"g", "../w", 1}, Meta{}},
		{"long meta", Key{"g", "w", 1}, Meta{Note: string(make([]byte, MaxMetaBytes+1))}},
	} {
		if _, err := s.Save(tc.k, t0, tc.m, nil); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// Save keeps the newest Keep checkpoints; blobs shared by content are
// counted, and a file goes only with its last reference.
func TestPruneAndDelete(t *testing.T) {
	s, _, dir := openStore(t, Options{InlineMax: 10, Keep: 2})
	big := gen(1, 100)
	blobFiles := func() []string {
		es, _ := os.ReadDir(filepath.Join(dir, "blobs"))
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	// Same content in two items: one file, two references.
	a := mustSave(t, s, Key{"g", "a", 1}, Meta{}, big)
	mustSave(t, s, Key{"g", "b", 1}, Meta{}, big)
	if n := len(blobFiles()); n != 1 {
		t.Fatalf("%d files for one content", n)
	}
	mustSave(t, s, Key{"g", "a", 1}, Meta{}, gen(2, 100))
	mustSave(t, s, Key{"g", "a", 1}, Meta{}, []byte("small"))
	// a's first checkpoint is pruned; its blob is still b's.
	if _, err := s.Get(a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned checkpoint: %v", err)
	}
	if list, _ := s.List("g", "a"); len(list) != 2 || list[0].Seq != 2 || list[1].Seq != 3 {
		t.Fatalf("after prune: %+v", list)
	}
	if got, err := s.Latest("g", "b"); err != nil || !bytes.Equal(got.State, big) {
		t.Fatalf("shared blob lost: %v", err)
	}
	if n := len(blobFiles()); n != 2 {
		t.Fatalf("%d blob files, want 2", n)
	}
	if n, err := s.Delete("g", "a"); err != nil || n != 2 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if _, err := s.Latest("g", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if n, err := s.Delete("g", "b"); err != nil || n != 1 {
		t.Fatalf("delete b: %d %v", n, err)
	}
	if f := blobFiles(); len(f) != 0 {
		t.Fatalf("blob files left: %v", f)
	}
	if refs, _ := s.Blobs(); len(refs) != 0 {
		t.Fatalf("references left: %v", refs)
	}
}

// Everything survives closing and reopening the bbolt file.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, false)
	s, err := Open(db, filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	small := mustSave(t, s, Key{"g", "a", 1}, Meta{Phase: "p"}, []byte("small"))
	big := mustSave(t, s, Key{"g", "b", 1}, Meta{}, gen(3, 40<<10))
	db.Close()

	db = openDB(t, dir, false)
	s, err = Open(db, filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Checkpoint{small, big} {
		got, err := s.Get(want.ID)
		if err != nil || !bytes.Equal(got.State, want.State) || got.Seq != want.Seq || got.Phase != want.Phase {
			t.Fatalf("after reopen: %+v %v", got, err)
		}
	}
}

// A bucket written by another layout version is refused.
func TestSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, true)
	if _, err := Open(db, filepath.Join(dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktRoot).Bucket(bktMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db, filepath.Join(dir, "blobs")); !errors.Is(err, ErrSchema) {
		t.Fatalf("open of a newer layout: %v", err)
	}
}
