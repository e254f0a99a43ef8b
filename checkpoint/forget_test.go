package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// DeleteGroup removes every checkpoint of a Group's items and the blobs
// only they referenced; a blob another Group still names stays, and other
// Groups are untouched.
func TestDeleteGroup(t *testing.T) {
	s, _, dir := openStore(t, Options{InlineMax: 10, Keep: 2})
	shared, own := gen(1, 100), gen(2, 100)
	files := func() int { es, _ := os.ReadDir(filepath.Join(dir, "blobs")); return len(es) }
	mustSave(t, s, Key{"g", "a", 1}, Meta{}, shared)
	mustSave(t, s, Key{"g", "b", 2}, Meta{}, own)
	mustSave(t, s, Key{"g", "b", 2}, Meta{}, []byte("small"))
	mustSave(t, s, Key{"g2", "a", 1}, Meta{}, shared)
	mustSave(t, s, Key{"gx", "a", 1}, Meta{}, []byte("x")) // a Group id with g as its prefix
	if n := files(); n != 2 {
		t.Fatalf("%d blob files, want 2", n)
	}
	if n, err := s.DeleteGroup("g"); err != nil || n != 3 {
		t.Fatalf("delete group: %d, %v; want 3", n, err)
	}
	for _, it := range []string{"a", "b"} {
		if _, err := s.Latest("g", it); !errors.Is(err, ErrNotFound) {
			t.Fatalf("g/%s after delete: %v", it, err)
		}
	}
	if got, err := s.Latest("g2", "a"); err != nil || !bytes.Equal(got.State, shared) {
		t.Fatalf("g2's shared blob: %v", err)
	}
	if _, err := s.Latest("gx", "a"); err != nil {
		t.Fatalf("gx: %v", err)
	}
	if n := files(); n != 1 {
		t.Fatalf("%d blob files after delete, want 1 (the shared one)", n)
	}
}
