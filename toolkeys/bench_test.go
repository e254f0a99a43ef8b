package toolkeys

import (
	"context"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkDo measures Do of a completed operation (replay) and of a new
// one, each against raw bbolt on a file opened the same way (fsync on) in
// the same run: one Update storing the same record bytes, and for replay
// one View reading them.
func BenchmarkDo(b *testing.B) {
	result := make([]byte, 256) // a receipt, not a payload
	call := func(context.Context, string, uint64) ([]byte, error) { return result, nil }
	ctx := context.Background()
	rec := Record{Op: opA, State: StateCompleted, Attempts: 1, Result: result, StartedAt: time.Now(), UpdatedAt: time.Now()}
	recBytes, _ := encodeRecord(&rec)
	key := []byte(keyKAT[0].want)

	// rawUpdate and rawView time n raw transactions of recBytes.
	raw := func(b *testing.B, n int) (update, view time.Duration) {
		db := openDB(b, tempDBPath(b))
		bk := []byte("raw")
		start := time.Now()
		for i := range n {
			err := db.Update(func(tx *bolt.Tx) error {
				bkt, err := tx.CreateBucketIfNotExists(bk)
				if err != nil {
					return err
				}
				return bkt.Put(strconv.AppendInt(key, int64(i), 10), recBytes)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		update = time.Since(start)
		start = time.Now()
		for range n {
			db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bk).Get(append(key, '0')) == nil {
					b.Fatal("raw record missing")
				}
				return nil
			})
		}
		return update, time.Since(start)
	}

	b.Run("replay", func(b *testing.B) {
		l := openLedger(b, openDB(b, tempDBPath(b)), Options{})
		if _, err := l.Do(ctx, opA, call); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if res, err := l.Do(ctx, opA, call); err != nil || !res.Replayed {
				b.Fatal(res, err)
			}
		}
		d := time.Since(start)
		b.StopTimer()
		update, view := raw(b, b.N)
		b.ReportMetric(d.Seconds()/update.Seconds(), "x-raw-update")
		b.ReportMetric(d.Seconds()/view.Seconds(), "x-raw-view")
	})
	b.Run("fresh", func(b *testing.B) {
		l := openLedger(b, openDB(b, tempDBPath(b)), Options{})
		ops := make([]Op, b.N)
		for i := range ops {
			ops[i] = Op{"mis-a", "wi-7", 3, "op-" + strconv.Itoa(i)}
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if res, err := l.Do(ctx, ops[i], call); err != nil || res.Replayed {
				b.Fatal(res, err)
			}
		}
		d := time.Since(start)
		b.StopTimer()
		update, _ := raw(b, b.N)
		b.ReportMetric(d.Seconds()/update.Seconds(), "x-raw-update")
	})
}
