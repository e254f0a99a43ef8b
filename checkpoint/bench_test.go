package checkpoint

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Every figure is a ratio to a baseline measured in the same run
// (docs/performance.md): a Save against a raw bbolt Update of the same bytes (inline)
// or against a raw durable file write plus a raw Update (blob), and a
// Latest against a raw bbolt Get or file read.
func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"inline-1KiB", 1 << 10}, {"blob-256KiB", 256 << 10}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			db := openDB(b, dir, false)
			s, err := Open(db, filepath.Join(dir, "blobs"))
			if err != nil {
				b.Fatal(err)
			}
			state := gen(1, bc.size)
			var saveDur, rawDur, latestDur, rawReadDur time.Duration
			b.SetBytes(int64(bc.size))
			for i := 0; b.Loop(); i++ {
				state[0] = byte(i) // new content each time: a new blob
				start := time.Now()
				if _, err := s.Save(Key{"g", "w", 1}, t0, Meta{Phase: "p"}, state); err != nil {
					b.Fatal(err)
				}
				saveDur += time.Since(start)
				start = time.Now()
				if _, err := s.Latest("g", "w"); err != nil {
					b.Fatal(err)
				}
				latestDur += time.Since(start)

				start = time.Now()
				rawSave(b, db, dir, i, state, bc.size > DefaultInlineMax)
				rawDur += time.Since(start)
				start = time.Now()
				rawRead(b, db, dir, i, bc.size > DefaultInlineMax)
				rawReadDur += time.Since(start)
			}
			b.ReportMetric(saveDur.Seconds()/rawDur.Seconds(), "save/raw")
			b.ReportMetric(latestDur.Seconds()/rawReadDur.Seconds(), "latest/raw")
		})
	}
}

// rawSave is the floor of a durable save: the state in a file made
// durable like a blob (when blob), then one bbolt Update.
func rawSave(b *testing.B, db *bolt.DB, dir string, i int, state []byte, blob bool) {
	val := state
	if blob {
		tmp := filepath.Join(dir, "raw.tmp")
		f, err := os.Create(tmp)
		if err != nil {
			b.Fatal(err)
		}
		f.Write(state)
		f.Sync()
		f.Close()
		if err := os.Rename(tmp, filepath.Join(dir, "raw")); err != nil {
			b.Fatal(err)
		}
		atomicfile.SyncDir(dir)
		val = []byte("ref")
	}
	err := db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("raw"))
		if err != nil {
			return err
		}
		return bk.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), val)
	})
	if err != nil {
		b.Fatal(err)
	}
}

func rawRead(b *testing.B, db *bolt.DB, dir string, i int, blob bool) {
	db.View(func(tx *bolt.Tx) error {
		_ = append([]byte(nil), tx.Bucket([]byte("raw")).Get(binary.BigEndian.AppendUint64(nil, uint64(i)))...)
		return nil
	})
	if blob {
		if _, err := os.ReadFile(filepath.Join(dir, "raw")); err != nil {
			b.Fatal(err)
		}
	}
}
