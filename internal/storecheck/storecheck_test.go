package storecheck

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A sound file: both meta pages valid, the newer one used, no page problem,
// no tx.Check finding; each meta damage is told apart.
func TestMetaAndPagesOfASoundFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, make([]byte, 3000))
		}); err != nil {
			t.Fatal(err)
		}
	}
	var structure []string
	db.View(func(tx *bolt.Tx) error { structure = Structure(tx); return nil })
	db.Close()
	ms, err := ReadMeta(path)
	if err != nil || ms.Used < 0 || !ms.Pages[0].Valid || !ms.Pages[1].Valid || len(ms.Problems()) != 0 {
		t.Fatalf("sound file: %+v %v %v", ms, err, ms.Problems())
	}
	if other := ms.Pages[1-ms.Used]; other.Txid+1 != ms.Txid() {
		t.Fatalf("used txid %d, other %d", ms.Txid(), other.Txid)
	}
	if ps := Pages(path, ms); len(ps) != 0 || len(structure) != 0 {
		t.Fatalf("sound file: pages %v, structure %v", ps, structure)
	}
	data, _ := os.ReadFile(path)
	data[ms.Used*ms.PageSize+16+56] ^= 0xff // the used page's checksum
	os.WriteFile(path, data, 0o600)
	ms2, _ := ReadMeta(path)
	if ms2.Used != 1-ms.Used || len(ms2.Problems()) != 1 {
		t.Fatalf("damaged newest meta page: %+v %v", ms2, ms2.Problems())
	}
	os.Truncate(path, int64(ms.PageSize)*3)
	if ms3, _ := ReadMeta(path); !ms3.Truncated() {
		t.Fatalf("truncated file not told: %+v", ms3)
	}
}

func TestGuard(t *testing.T) {
	if err := Guard(func() error { panic("bad page") }); !IsPanic(err) {
		t.Fatalf("panic: %v", err)
	}
	want := errors.New("plain")
	if err := Guard(func() error { return want }); err != want || IsPanic(err) {
		t.Fatalf("plain error: %v", err)
	}
}
