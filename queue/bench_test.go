//go:build linux

package queue

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Every figure is reported as a ratio to a baseline measured in the same
// run (docs/performance.md); absolute numbers drift between machines.

// signedDocs returns n signed event documents spread over the given number
// of Groups, as they arrive on the wire (not canonical: the members are in
// encoding/json order).
func signedDocs(b *testing.B, n, groups int) [][]byte {
	b.Helper()
	r := rand.New(rand.NewPCG(1, uint64(groups)))
	streams := make([]*stream, groups)
	for i := range streams {
		want := n/groups + 1
		for items := want/6 + 2; streams[i] == nil || len(streams[i].evs) < want; items *= 2 {
			streams[i] = randomStream(fmt.Sprintf("grp-%02d", i), items, r)
		}
	}
	var docs [][]byte
	for len(docs) < n {
		for _, st := range streams {
			in := st.evs[0]
			st.evs = st.evs[1:]
			ev := *in.Event
			// Random ids, as authorities issue them (authority-lite: 96
			// random bits): the dedupe index then takes random inserts.
			ev.EventID = fmt.Sprintf("evt-%024x", r.Uint64()<<32^r.Uint64())
			ev.Signature = protocol.Signature{Alg: "Ed25519", KeyID: "authority-1#k1", CreatedAt: ev.OccurredAt}
			unsigned, err := protocol.Marshal(&ev)
			if err != nil {
				b.Fatal(err)
			}
			ev.Signature.Value = base64.RawURLEncoding.EncodeToString(ed25519.Sign(authorityKey, unsigned))
			doc, err := json.Marshal(&ev)
			if err != nil {
				b.Fatal(err)
			}
			docs = append(docs, doc)
			if len(docs) == n {
				break
			}
		}
	}
	return docs
}

// receive is the runtime's inbound path for one event (as in
// runtime.decodeInbound): strict parse once, then protocol.InboundEvent —
// typed decode from the parsed value, one canonical pass giving both the
// signing input and the bytes to store, signature check.
func receive(doc []byte, keys protocol.KeyResolver) (Incoming, error) {
	v, err := protocol.Parse(doc, protocol.DecodeOptions{})
	if err != nil {
		return Incoming{}, err
	}
	ev, canon, err := protocol.InboundEvent(v.(map[string]any), keys)
	if err != nil {
		return Incoming{}, err
	}
	return Incoming{Raw: canon, Event: ev}, nil
}

const ingestBatch = 256

// BenchmarkIngest: durable ingest (decode, verify, dedupe, apply, cursor;
// fsync on, at most 256 events per commit) against signature verification
// alone (one goroutine) and against raw bbolt group-commit puts of the same
// bytes. The headline figures are the runtime's shape, which verifies on
// every core while it commits; sequential/verify-only is the same work in
// one goroutine, the like-for-like comparison with the baseline.
func BenchmarkIngest(b *testing.B) {
	pub := authorityKey.Public().(ed25519.PublicKey)
	keys := protocol.KeySet{"authority-1#k1": pub}
	for _, groups := range []int{1, 16} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			b.StopTimer()
			docs := signedDocs(b, b.N, groups)
			// Baseline 1: Ed25519 verification alone of the same events.
			inputs := make([][2][]byte, len(docs))
			for i, d := range docs {
				var ev protocol.Event
				json.Unmarshal(d, &ev)
				sig, _ := base64.RawURLEncoding.DecodeString(ev.Signature.Value)
				ev.Signature.Value = ""
				inputs[i][0], _ = protocol.Marshal(&ev)
				inputs[i][1] = sig
			}
			start := time.Now()
			for _, in := range inputs {
				if !ed25519.Verify(pub, in[0], in[1]) {
					b.Fatal("verify")
				}
			}
			verifyDur := time.Since(start)
			// Baseline 3: the inbound pipeline without the store, to show
			// the store's own share.
			start = time.Now()
			for _, d := range docs {
				if _, err := receive(d, keys); err != nil {
					b.Fatal(err)
				}
			}
			receiveDur := time.Since(start)

			// The ingest as the runtime runs it (runtime/client/decode.go):
			// decoding and verification on every core, in order, while
			// one goroutine commits up to 256 events per fsync.
			b.StartTimer()
			ingestDur, raws := ingestPipelined(b, docs, keys)
			b.StopTimer()
			// The same work in one goroutine, one commit per 256 events.
			seqDur := ingestSequential(b, docs, keys)

			// Baseline 2: raw bbolt puts of the same bytes, same batching.
			db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			start = time.Now()
			for i := 0; i < len(raws); i += ingestBatch {
				err := db.Update(func(tx *bolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists([]byte("raw"))
					if err != nil {
						return err
					}
					for j := i; j < min(i+ingestBatch, len(raws)); j++ {
						if err := bk.Put(u64(uint64(j)), raws[j]); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			rawDur := time.Since(start)

			n := float64(len(docs))
			b.ReportMetric(n/ingestDur.Seconds(), "events/s")
			b.ReportMetric(verifyDur.Seconds()/ingestDur.Seconds(), "ingest/verify-only")
			b.ReportMetric(rawDur.Seconds()/ingestDur.Seconds(), "ingest/raw-bbolt")
			b.ReportMetric(receiveDur.Seconds()/ingestDur.Seconds(), "ingest/receive-only")
			b.ReportMetric(verifyDur.Seconds()/seqDur.Seconds(), "sequential/verify-only")
		})
	}
}

// ingestPipelined runs the ingest as runtime's client does: frames are
// decoded and verified by one goroutine per CPU (at most 4), handed on in
// arrival order, and the committing goroutine takes whatever has arrived,
// at most ingestBatch per commit. It returns the elapsed time and the
// stored bytes.
func ingestPipelined(b *testing.B, docs [][]byte, keys protocol.KeyResolver) (time.Duration, [][]byte) {
	s, err := Open(b.TempDir(), Options{NoSocket: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	type result struct {
		in  Incoming
		err error
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	jobs := make(chan int, ingestBatch)
	futures := make(chan chan result, ingestBatch)
	ch := make(chan Incoming, ingestBatch)
	errc := make(chan error, 1)
	start := time.Now()
	outs := make([]chan result, len(docs))
	for range workers {
		go func() {
			for i := range jobs {
				in, err := receive(docs[i], keys)
				outs[i] <- result{in, err}
			}
		}()
	}
	go func() {
		defer close(futures)
		defer close(jobs)
		for i := range docs {
			outs[i] = make(chan result, 1)
			futures <- outs[i]
			jobs <- i
		}
	}()
	go func() {
		defer close(ch)
		for f := range futures {
			r := <-f
			if r.err != nil {
				errc <- r.err
				return
			}
			ch <- r.in
		}
	}()
	raws := make([][]byte, 0, len(docs))
	batch := make([]Incoming, 0, ingestBatch)
	for in := range ch {
		batch = append(batch[:0], in)
	drain:
		for len(batch) < ingestBatch {
			select {
			case nx, ok := <-ch:
				if !ok {
					break drain
				}
				batch = append(batch, nx)
			default:
				break drain
			}
		}
		res, err := s.Apply(batch)
		if err != nil || len(res.Applied) != len(batch) {
			b.Fatalf("apply: %v (%d of %d)", err, len(res.Applied), len(batch))
		}
		for _, in := range batch {
			raws = append(raws, in.Raw)
		}
	}
	d := time.Since(start)
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	return d, raws
}

// ingestSequential is the same work in one goroutine.
func ingestSequential(b *testing.B, docs [][]byte, keys protocol.KeyResolver) time.Duration {
	s, err := Open(b.TempDir(), Options{NoSocket: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	batch := make([]Incoming, 0, ingestBatch)
	for i, d := range docs {
		in, err := receive(d, keys)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, in)
		if len(batch) == ingestBatch || i == len(docs)-1 {
			res, err := s.Apply(batch)
			if err != nil || len(res.Applied) != len(batch) {
				b.Fatalf("apply: %v (%d of %d)", err, len(res.Applied), len(batch))
			}
			batch = batch[:0]
		}
	}
	return time.Since(start)
}

var (
	rebuildOnce sync.Once
	rebuildDir  string
	rebuildN    int
)

// rebuildStore builds (once) a store holding 100k events in 4 Groups.
func rebuildStore(b *testing.B) string {
	rebuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mwp-queue-bench-")
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(dir, Options{NoSync: true, NoSocket: true})
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(4, 4))
		for g := 0; g < 4; g++ {
			st := randomStream(fmt.Sprintf("grp-%d", g), 3600, r)
			for i := 0; i < len(st.evs) && rebuildN < 100_000; i += 1000 {
				end := min(i+1000, len(st.evs), i+100_000-rebuildN)
				if _, err := s.Apply(st.evs[i:end]); err != nil {
					b.Fatal(err)
				}
				rebuildN += end - i
			}
		}
		s.Close()
		rebuildDir = dir
	})
	return rebuildDir
}

// dropCache evicts the file from the page cache (clean pages only), so the
// next open reads from disk without touching other processes' cache.
func dropCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f.Sync()
	const fadvDontNeed = 4
	if _, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); e != 0 {
		b.Fatal(e)
	}
}

// rawScan is the baseline: open, cursor scan of every inbox, JSON decode of
// each event.
func rawScan(b *testing.B, path string, populate bool) int {
	opts := &bolt.Options{}
	if populate {
		opts.MmapFlags = mmapPopulate
	}
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktGroups).ForEachBucket(func(name []byte) error {
			c := tx.Bucket(bktGroups).Bucket(name).Bucket(bktInbox).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				var ev protocol.Event
				if err := json.Unmarshal(v, &ev); err != nil {
					return err
				}
				n++
			}
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// processCPU is the CPU time the process has used (user and system, every
// thread): on a machine shared with other work it shows the cost that wall
// time hides, and replay decodes on every core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRebuild100k: Open + Rebuild of 100k events against open + raw
// cursor scan + JSON decode of the same inboxes, warm and cold page cache;
// by wall time, and by the process's CPU time (rebuild-cpu/raw-scan-cpu).
func BenchmarkRebuild100k(b *testing.B) {
	dir := rebuildStore(b)
	path := filepath.Join(dir, FileName)
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			var rebuildDur, rawDur, rawPopDur, rebuildCPU, rawCPU time.Duration
			for range b.N {
				if cold {
					dropCache(b, path)
				}
				start, cpu := time.Now(), processCPU()
				s, err := Open(dir, Options{NoSocket: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Rebuild(); err != nil {
					b.Fatal(err)
				}
				rebuildDur += time.Since(start)
				rebuildCPU += processCPU() - cpu
				s.Close()

				if cold {
					dropCache(b, path)
				}
				start, cpu = time.Now(), processCPU()
				if n := rawScan(b, path, false); n != rebuildN {
					b.Fatalf("scanned %d events, want %d", n, rebuildN)
				}
				rawDur += time.Since(start)
				rawCPU += processCPU() - cpu

				if cold {
					dropCache(b, path)
				}
				start = time.Now()
				rawScan(b, path, true)
				rawPopDur += time.Since(start)
			}
			b.ReportMetric(float64(rebuildN*b.N)/rebuildDur.Seconds(), "events/s")
			b.ReportMetric(rebuildDur.Seconds()/rawDur.Seconds(), "rebuild/raw-scan")
			b.ReportMetric(rebuildDur.Seconds()/rawPopDur.Seconds(), "rebuild/raw-scan-populate")
			b.ReportMetric(rebuildCPU.Seconds()/rawCPU.Seconds(), "rebuild-cpu/raw-scan-cpu")
		})
	}
}

// BenchmarkHeapPerItem: heap held by the in-memory queue view per WorkItem
// at 100k items, loaded by Open.
func BenchmarkHeapPerItem(b *testing.B) {
	const items = 100_000
	dir := b.TempDir()
	st := newStream("g")
	st.missionCreated()
	st.authorized("wi-0", testContract(1, protocol.UrgencyHigh, true, "wi-x"))
	st.offered("wi-0", nil, self, "worker-2")
	st.accepted("wi-0", self, 1, 1)
	tmpl := viewOf(&testing.T{}, "g", st.evs).items["wi-0"]
	s, err := Open(dir, Options{NoSync: true, NoSocket: true})
	if err != nil {
		b.Fatal(err)
	}
	mustApply(b, s, st.evs...)
	err = s.db.Update(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktGroups).Bucket([]byte("g")).Bucket(bktQueue)
		for i := range items {
			e := tmpl.clone()
			e.WorkItemID = fmt.Sprintf("wi-%06d", i)
			e.Dependencies[0].WorkItemID = fmt.Sprintf("wi-%06d", max(0, i-1))
			v, _ := json.Marshal(e)
			if err := q.Put([]byte(e.WorkItemID), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	// Heap held by an open store, measured as what closing it frees: a
	// difference of two readings after GC, both taken with everything else
	// unchanged, so garbage from setup cannot skew it.
	var perItem float64
	for range b.N {
		s, err := Open(dir, Options{NoSync: true, NoSocket: true})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(s.groups["g"].items); n < items {
			b.Fatalf("%d items loaded", n)
		}
		var open, closed runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&open)
		s.Close()
		s = nil
		runtime.GC()
		runtime.ReadMemStats(&closed)
		perItem = float64(int64(open.HeapAlloc)-int64(closed.HeapAlloc)) / items
	}
	b.ReportMetric(perItem, "heap-B/item")
	b.ReportMetric(perItem/2048, "heap/2KiB-goal")
}

// TestMain removes the shared benchmark store.
func TestMain(m *testing.M) {
	code := m.Run()
	if rebuildDir != "" {
		os.RemoveAll(rebuildDir)
	}
	os.Exit(code)
}
