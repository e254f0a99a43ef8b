package toolkeys

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/queue"
)

func TestOpenLedger(t *testing.T) {
	t.Run("inside the worker store", func(t *testing.T) {
		dir := t.TempDir()
		s, err := queue.Open(dir, queue.Options{NoSocket: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		l, err := OpenLedger(s.DB())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Do(context.Background(), opA, callService(newService(), opA)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		path := tempDBPath(t)
		db := openDB(t, path)
		openLedger(t, db, Options{}).Do(context.Background(), opA, func(context.Context, string, uint64) ([]byte, error) { return []byte("r"), nil })
		db.Close()
		ro, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		l, err := OpenLedger(ro)
		if err != nil {
			t.Fatal(err)
		}
		if rec, ok, err := l.Lookup(keyKAT[0].want); !ok || err != nil || string(rec.Result) != "r" {
			t.Fatalf("Lookup: %+v %v %v", rec, ok, err)
		}
		if _, err := l.Do(context.Background(), opA, mustNotCall(t)); err != nil {
			t.Fatalf("replay on a read-only file: %v", err)
		}
		if err := l.Fence("mis-a", "wi-7", 9); err == nil {
			t.Fatal("Fence wrote to a read-only file")
		}
	})
	t.Run("read-only without a ledger", func(t *testing.T) {
		path := tempDBPath(t)
		openDB(t, path).Close()
		ro, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if _, err := OpenLedger(ro); !errors.Is(err, ErrSchema) {
			t.Fatalf("OpenLedger: %v", err)
		}
	})
	t.Run("other schema", func(t *testing.T) {
		db := openDB(t, tempDBPath(t))
		openLedger(t, db, Options{})
		db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bktRoot).Bucket(bktMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, 2))
		})
		if _, err := OpenLedger(db); !errors.Is(err, ErrSchema) {
			t.Fatalf("OpenLedger: %v", err)
		}
	})
}
