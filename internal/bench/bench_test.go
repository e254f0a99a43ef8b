package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestCheck(t *testing.T) {
	ok := Config{Items: 10, Lanes: 2, Workers: 1, Groups: 1, Slots: 1}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no items", func(c *Config) { c.Items = 0 }, "--items"},
		{"no lanes", func(c *Config) { c.Lanes = 0 }, "--lanes must"},
		{"more lanes than items", func(c *Config) { c.Lanes = 11 }, "exceeds --items"},
		{"too many lanes", func(c *Config) { c.Items, c.Lanes = 1000, MaxLanes+1 }, "open WorkItems"},
		{"no workers", func(c *Config) { c.Workers = 0 }, "--workers"},
		{"no groups", func(c *Config) { c.Groups = 0 }, "--groups must"},
		{"more groups than items", func(c *Config) { c.Groups = 11 }, "--groups 11 exceeds"},
		{"no slots", func(c *Config) { c.Slots = 0 }, "--slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Check()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Check: %v, want %q", err, tc.want)
			}
		})
	}
}

// The meta txid read from the file advances by one per committed write
// transaction, and not for a rolled-back one or a read.
func TestBoltTxIDCountsCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start, err := boltTxID(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Update(func(*bolt.Tx) error { return errors.New("rolled back") })
	_ = db.View(func(*bolt.Tx) error { return nil })
	end, err := boltTxID(path)
	if err != nil {
		t.Fatal(err)
	}
	if end-start != 5 {
		t.Fatalf("txid moved %d for 5 commits", end-start)
	}
	if _, err := boltTxID(filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Fatal("no error for a missing file")
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got, want := percentiles(ds), (Latency{P50: 50, P90: 90, P99: 99, Max: 100}); got != want {
		t.Fatalf("percentiles %+v, want %+v", got, want)
	}
	if got := percentiles([]time.Duration{3 * time.Millisecond}); got != (Latency{3, 3, 3, 3}) {
		t.Fatalf("one sample: %+v", got)
	}
}

// A failure event of an item ends its wait with the event's type; its
// phases close once, whatever the log repeats.
func TestTrackerFailureAndRepeats(t *testing.T) {
	tr := newTracker(2)
	a, b := tr.add("wi-a"), tr.add("wi-b")
	now := time.Now()
	tr.note("wi-a", protocol.EvtWorkSubmitted, now, 10)
	tr.note("wi-a", protocol.EvtWorkSubmitted, now.Add(time.Second), 10)
	if err := a.await(context.Background(), phaseSubmitted); err != nil || !a.at[phaseSubmitted].Equal(now) {
		t.Fatalf("submitted: %v at %v", err, a.at[phaseSubmitted])
	}
	tr.note("wi-b", protocol.EvtWorkFailed, now, 10)
	if err := b.await(context.Background(), phaseSubmitted); err == nil || !strings.Contains(err.Error(), "work.failed") {
		t.Fatalf("failed item: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.await(ctx, phaseVerified); err == nil {
		t.Fatal("no error when the wait is cancelled")
	}
	tr.note("wi-unknown", protocol.EvtWorkStarted, now, 10)
	if tr.verified() != 0 || tr.events != 3 {
		t.Fatalf("verified %d, events %d", tr.verified(), tr.events)
	}
}

// BenchmarkEndToEnd is `mwp-worker bench` as a Go benchmark: b.N no-op
// WorkItems through the embedded authority and one worker over wss,
// fsync on, at 1 and 8 lanes; it reports items/s and the ratio to the
// Ed25519 floor measured in the same run.
func BenchmarkEndToEnd(b *testing.B) {
	for _, lanes := range []int{1, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			n := max(b.N, lanes)
			res, err := Run(context.Background(), Config{Items: n, Lanes: lanes, Workers: 1, Groups: 1, Slots: 8, Fsync: true, Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			// The benchmark's own clock also ran through set-up and the
			// floor: ns/op is the measured window's time per item instead.
			b.ReportMetric(res.Seconds*1e9/float64(n), "ns/op")
			b.ReportMetric(res.ItemsPerSecond, "items/s")
			b.ReportMetric(res.Floor.Ratio, "x_crypto_floor")
			b.ReportMetric(res.PerItem.Fdatasyncs, "fdatasyncs/item")
			b.ReportMetric(res.Latency.EndToEnd.P50, "p50_ms")
			b.ReportMetric(res.PerItem.AllocatedBytes, "alloc_B/item")
			b.ReportMetric(res.Floor.CPUTimes, "cpu_x_floor")
		})
	}
}

// More Groups than the authority's default mission.create burst (20 a
// human) run: the embedded authority lifts the limits the bench says it
// lifts (docs/shapes.md), or the 21st Mission is refused RATE_LIMITED.
func TestRunManyGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an authority and a worker")
	}
	const groups = 24
	res, err := Run(context.Background(), Config{Items: groups, Lanes: 4, Workers: 1, Groups: groups, Slots: 4, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified != groups || res.Groups != groups {
		t.Fatalf("verified %d items in %d groups, want %d in %d", res.Verified, res.Groups, groups, groups)
	}
}
