package jslog

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"
	"github.com/missionweave/mwp-worker/internal/natstest"
)

// appendRate is how many commits a second lanes deciders make, each on a
// Group of its own, each commit three 600-byte events and a receipt (a
// WorkItem's usual command), every one durable before the next.
func appendRate(b *testing.B, s logstore.Store, run string, lanes, commits int) float64 {
	ev := bytes.Repeat([]byte("e"), 600)
	events := [][]byte{ev, ev, ev}
	var wg sync.WaitGroup
	start := time.Now()
	for l := range lanes {
		wg.Go(func() {
			g := fmt.Sprintf("%s-g%d", run, l)
			for i := range commits {
				err := s.Append(context.Background(), logstore.Commit{GroupID: g, After: uint64(3 * i), Events: events,
					Receipts: []logstore.Receipt{{Key: fmt.Sprintf("%s.%d", g, i), Value: []byte(`{"receipt":1}`)}}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(lanes*commits) / time.Since(start).Seconds()
}

// BenchmarkAppend reports commits per second on the bbolt store, on one
// NATS server and on three clustered on loopback (replicas 3), every write
// synced before its ack, and the JetStream rates as ratios of bbolt's in
// the same run (docs/performance.md).
func BenchmarkAppend(b *testing.B) {
	bolt, err := boltlog.Open(filepath.Join(b.TempDir(), "authority.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer bolt.Close()
	one, err := Open(context.Background(), Config{URLs: natstest.Server(b), Replicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer one.Close()
	three, err := Open(context.Background(), Config{URLs: natstest.Cluster(b, 3), Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer three.Close()
	runs := 0
	for _, lanes := range []int{1, 16} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			const commits = 100
			var rb, r1, r3 float64
			for range b.N {
				runs++ // the benchmark runs again with a larger b.N: new Groups
				run := fmt.Sprintf("r%d", runs)
				rb += appendRate(b, bolt, run, lanes, commits)
				r1 += appendRate(b, one, run, lanes, commits)
				r3 += appendRate(b, three, run, lanes, commits)
			}
			n := float64(b.N)
			b.ReportMetric(rb/n, "bolt-commits/s")
			b.ReportMetric(r1/n, "js1-commits/s")
			b.ReportMetric(r3/n, "js3-commits/s")
			b.ReportMetric(r1/rb, "js1/bolt")
			b.ReportMetric(r3/rb, "js3/bolt")
		})
	}
}
