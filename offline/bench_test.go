package offline

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Every figure is reported as a ratio to a baseline measured in the same run
// (docs/performance.md): one raw Ed25519 signature over the command's bytes plus one
// bbolt Update that puts those bytes — the least any durable signed buffer
// must do per command.

// baseline times n raw sign+put operations of the given messages in a
// bucket of db.
func baseline(b *testing.B, db *bolt.DB, key protocol.PrivateKey, msgs [][]byte) time.Duration {
	b.Helper()
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("baseline")); return err }); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i, m := range msgs {
		sig := ed25519.Sign(key.Key, m)
		if err := db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("baseline")).Put(u64(uint64(i)), append(m, sig...))
		}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func report(b *testing.B, base time.Duration, n int) {
	b.ReportMetric(float64(base.Nanoseconds())/float64(n), "baseline-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(base.Nanoseconds()), "x-baseline")
}

// BenchmarkAppend: sign a progress command with its binding and append it
// durably, against the raw sign+put baseline.
func BenchmarkAppend(b *testing.B) {
	key := testKey(b)
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", !noSync), func(b *testing.B) {
			db := openDB(b, filepath.Join(b.TempDir(), "worker.db"), noSync)
			buf := openBuffer(b, db, Limits{MaxCommands: b.N + 1, MaxBytes: 1 << 40})
			cmds := make([]*protocol.Command, b.N)
			binds := make([]protocol.OfflineBinding, b.N)
			msgs := make([][]byte, b.N)
			for i := range cmds {
				binds[i] = binding(time.Duration(i%200_000)*time.Millisecond, protocol.Usage{Tokens: uint64(i)})
				cmds[i] = command(b, protocol.CmdLeaseRenew, binds[i], i)
				msgs[i] = signedBuffered(b, key, i) // same size as what Append stores
			}
			base := baseline(b, openDB(b, filepath.Join(b.TempDir(), "base.db"), noSync), key, msgs)
			b.ResetTimer()
			for i := range b.N {
				raw, err := SignBuffered(cmds[i], binds[i], key)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := buf.Append(raw); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, base, b.N)
		})
	}
}

// BenchmarkRebase: Prepare (decode, rebase, re-sign, persist before send)
// of every buffered command after a reconnect, against the same baseline.
func BenchmarkRebase(b *testing.B) {
	key := testKey(b)
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", !noSync), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "worker.db")
			fill := openDB(b, path, true) // filling is not measured
			buf := openBuffer(b, fill, Limits{MaxCommands: b.N + 1, MaxBytes: 1 << 40})
			ids := make([]uint64, b.N)
			msgs := make([][]byte, b.N)
			for i := range ids {
				msgs[i] = signedBuffered(b, key, i)
				ids[i] = mustAppend(b, buf, msgs[i]).ID
			}
			checkAndClose(b, fill)
			db := openDB(b, path, noSync)
			buf = openBuffer(b, db, Limits{MaxCommands: b.N + 1, MaxBytes: 1 << 40})
			base := baseline(b, openDB(b, filepath.Join(b.TempDir(), "base.db"), noSync), key, msgs)
			s := CurrentSession{SessionEpoch: 9, MembershipEpochs: map[string]uint64{"grp-a": 2}, Now: at(time.Hour)}
			b.ResetTimer()
			for _, id := range ids {
				if _, err := buf.Prepare(id, s, key); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, base, b.N)
		})
	}
}
