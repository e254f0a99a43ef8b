package storecheck

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The walk's reads give the bytes, and fail where, a read of the file
// itself does, in file order (from the pages read ahead), backward, in
// jumps, across the end and past it.
func TestWalkerReadSameAsFile(t *testing.T) {
	const ps, pages = 64, 100
	data := make([]byte, ps*pages)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type read struct{ id, n uint64 }
	var reads []read
	for id := uint64(2); id < 80; id++ {
		reads = append(reads, read{id, 1}) // in file order
	}
	reads = append(reads, read{10, 1}, read{11, 3}, read{14, 1}, read{50, 2}, read{52, 40}, read{5, 1})
	reads = append(reads, read{96, 1}, read{97, 1}, read{98, 2}, read{99, 2}, read{101, 1}, read{40, 1})
	for range 300 {
		reads = append(reads, read{uint64(r.IntN(pages + 2)), uint64(1 + r.IntN(3))})
	}
	w := &walker{f: f, ps: ps, size: ps * (pages - 1)} // the walk's size may be short of the file's
	for _, rd := range reads {
		got, want := make([]byte, rd.n*ps), make([]byte, rd.n*ps)
		gotErr := w.read(got, rd.id)
		_, wantErr := f.ReadAt(want, int64(rd.id*ps))
		if (gotErr != nil) != (wantErr != nil) || (wantErr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("read of %d pages at page %d: error %v, want %v; bytes equal %v", rd.n, rd.id, gotErr, wantErr, bytes.Equal(got, want))
		}
	}
}
