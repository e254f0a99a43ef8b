package bench

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result is one run's figures (docs/shapes.md, "mwp-worker bench").
type Result struct {
	Items   int  `json:"items"`
	Lanes   int  `json:"lanes"`
	Workers int  `json:"workers"`
	Groups  int  `json:"groups"`
	Slots   int  `json:"slots"`
	Fsync   bool `json:"fsync"`
	// Authority is "embedded" (started by the run) or the URL of the
	// running authority the run targeted; then the stores, bytes and CPU
	// measured are the workers' and the driver's only.
	Authority string `json:"authority"`
	// Verified is the items that reached verified: always Items, since a
	// run where one did not is an error.
	Verified       int     `json:"verified"`
	Seconds        float64 `json:"seconds"`
	ItemsPerSecond float64 `json:"itemsPerSecond"`
	Latency        Phases  `json:"latencyMs"`
	PerItem        PerItem `json:"perItem"`
	Totals         Totals  `json:"totals"`
	Floor          Floor   `json:"cryptoFloor"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures at the end.
	LoadAverage [3]float64 `json:"loadAverage"`
	// Held is what the whole process held once the last item was
	// verified, every Group and connection still open.
	Held Held `json:"held"`
}

// Held is a reading of the process after two garbage collections.
type Held struct {
	HeapBytes  uint64 `json:"heapBytes"` // live heap (HeapAlloc)
	RSSBytes   uint64 `json:"rssBytes"`  // VmRSS
	Goroutines int    `json:"goroutines"`
}

// readHeld collects garbage and reads what is left.
func readHeld() Held {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	h := Held{HeapBytes: ms.HeapAlloc, Goroutines: goruntime.NumGoroutine()}
	h.RSSBytes, _ = rss()
	return h
}

// Phases are latency percentiles in milliseconds.
type Phases struct {
	OfferToAccepted     Latency `json:"offerToAccepted"`
	AcceptedToStarted   Latency `json:"acceptedToStarted"`
	StartedToSubmitted  Latency `json:"startedToSubmitted"`
	SubmittedToVerified Latency `json:"submittedToVerified"`
	EndToEnd            Latency `json:"endToEnd"`
}

type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// PerItem divides the totals by the items.
type PerItem struct {
	Commands     float64 `json:"commands"`
	Events       float64 `json:"events"`
	Fdatasyncs   float64 `json:"fdatasyncs"`
	BytesWritten float64 `json:"bytesWritten"`
	CPUMs        float64 `json:"cpuMs"`
	// AllocatedBytes is the heap the whole process allocated an item.
	AllocatedBytes float64 `json:"allocatedBytes"`
}

// Totals are the run's counts over the measured window.
type Totals struct {
	// Commands accepted by the authority, by type.
	Commands map[string]int `json:"commands"`
	// Refused are commands the authority refused, by type and error code.
	Refused map[string]int `json:"refused"`
	// Events appended to the Groups' logs (all types).
	Events int `json:"events"`
	// Commits are committed bbolt write transactions per store file
	// (the file's meta txid, before and after).
	Commits map[string]uint64 `json:"commits"`
	// FileGrowths are store file size changes seen by polling every
	// 20ms; bbolt fsyncs once per growth.
	FileGrowths int `json:"fileGrowths"`
	// Fdatasyncs = 2 per commit (pages, then meta) + one per growth, with
	// fsync on; 0 with fsync off.
	Fdatasyncs uint64 `json:"fdatasyncs"`
	// RateLimited counts the driver's requests to a remote authority that
	// it answered RATE_LIMITED and the driver waited out (the authority's
	// limits: docs/operations.md), RateLimitedSeconds the time waited;
	// the workers' own show in Refused. 0 with the embedded authority.
	RateLimited        int     `json:"rateLimited"`
	RateLimitedSeconds float64 `json:"rateLimitedSeconds"`
	// WriteBytes is /proc/self/io write_bytes: bytes this process caused
	// to be sent to storage (every store, page writes and meta).
	WriteBytes uint64  `json:"writeBytes"`
	CPUSeconds float64 `json:"cpuSeconds"` // user + system, whole process
	// AllocatedBytes is the heap the whole process allocated
	// (runtime/metrics /gc/heap/allocs:bytes).
	AllocatedBytes uint64 `json:"allocatedBytes"`
}

// Floor is the Ed25519 work of the run's commands and events, measured
// on all cores of this machine right after the run.
type Floor struct {
	Cores        int `json:"cores"`
	MessageBytes int `json:"messageBytes"` // mean size of the run's WorkItem events
	// SignUs and VerifyUs are wall time per operation on one core
	// (wall time × cores / operations), under the load of the moment.
	SignUs          float64 `json:"signUs"`
	VerifyUs        float64 `json:"verifyUs"`
	SignsPerItem    float64 `json:"signsPerItem"`
	VerifiesPerItem float64 `json:"verifiesPerItem"`
	PerItemUs       float64 `json:"perItemUs"` // one core's Ed25519 wall time per item
	ItemsPerSecond  float64 `json:"itemsPerSecond"`
	// Ratio is the measured items/s over the floor's.
	Ratio float64 `json:"ratio"`
	// SignCPUUs and VerifyCPUUs are the CPU time of one operation, which
	// other processes' load does not inflate; PerItemCPUUs is an item's,
	// and CPUShare its part of the CPU the run spent per item.
	SignCPUUs    float64 `json:"signCpuUs"`
	VerifyCPUUs  float64 `json:"verifyCpuUs"`
	PerItemCPUUs float64 `json:"perItemCpuUs"`
	CPUShare     float64 `json:"cpuShare"`
	// CPUTimes is perItem.cpuMs over PerItemCPUUs: an item's CPU as a
	// multiple of its Ed25519 work (1/CPUShare).
	CPUTimes float64 `json:"cpuTimes"`
}

// counters are what a snapshot reads at the window's edges.
type counters struct {
	txids      []uint64
	writeBytes uint64
	cpu        time.Duration
	allocated  uint64
	commands   map[string]float64 // "type result" → count
	limited    int                // RATE_LIMITED answers waited out
	limitWait  time.Duration
	sequences  map[string]uint64
}

func snapshot(files []string, a authority, groups []string) (counters, error) {
	var c counters
	for _, f := range files {
		id, err := boltTxID(f)
		if err != nil {
			return c, err
		}
		c.txids = append(c.txids, id)
	}
	io, err := procIO()
	if err != nil {
		return c, err
	}
	c.writeBytes = io["write_bytes"]
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return c, err
	}
	c.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	c.allocated = heapAllocated()
	c.commands, c.sequences, err = a.counts(groups)
	c.limited, c.limitWait = a.limited()
	return c, err
}

// heapAllocated is the bytes this process has allocated on the heap
// since it started; reading it stops nothing.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// commandCounts sums a commands counter of reg by its type and result
// labels ("type result" → count).
func commandCounts(reg prometheus.Gatherer, name string) (map[string]float64, error) {
	fams, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			var typ, result string
			for _, l := range m.Label {
				switch l.GetName() {
				case "type":
					typ = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			out[typ+" "+result] += m.Counter.GetValue()
		}
	}
	return out, nil
}

// gaugeValue is the sum of reg's gauge name over its labels.
func gaugeValue(reg prometheus.Gatherer, name string) (float64, error) {
	fams, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		var v float64
		for _, m := range f.Metric {
			v += m.GetGauge().GetValue()
		}
		return v, nil
	}
	return 0, fmt.Errorf("no gauge %s in the registry", name)
}

// procIO reads /proc/self/io.
func procIO() (map[string]uint64, error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return nil, fmt.Errorf("bytes written are read from /proc/self/io: %w", err)
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/self/io: %q: %w", sc.Text(), err)
		}
		out[k] = n
	}
	return out, sc.Err()
}

// boltTxID is the id of the last transaction committed to a bbolt file:
// the larger txid of its two meta pages whose checksum holds (readMeta).
// A commit writes its pages, fdatasyncs, writes a meta page with txid+1
// and fdatasyncs again, so the difference over a window counts commits.
func boltTxID(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	m, err := readMeta(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return m.txid, nil
}

// sampler counts store file size changes.
type sampler struct {
	files []string
	sizes []int64
	grows int
	stopC chan struct{}
	done  chan struct{}
}

func newSampler(files []string) *sampler {
	s := &sampler{files: files, sizes: make([]int64, len(files)), stopC: make(chan struct{}), done: make(chan struct{})}
	s.sample(false)
	return s
}

func (s *sampler) sample(count bool) {
	for i, f := range s.files {
		if st, err := os.Stat(f); err == nil {
			if count && st.Size() != s.sizes[i] {
				s.grows++
			}
			s.sizes[i] = st.Size()
		}
	}
}

func (s *sampler) start(ctx context.Context) {
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample(true)
			case <-s.stopC:
				s.sample(true)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
}

func (s *sampler) stop() int {
	close(s.stopC)
	<-s.done
	return s.grows
}

// opCost is what one Ed25519 operation took.
type opCost struct {
	wall time.Duration // wall time × cores / operations: per operation on one core, under the load of the moment
	cpu  time.Duration // this process's CPU time per operation, whatever else the machine runs
}

// measureFloor times Ed25519 signing and verification of messages of
// size bytes on every core, in alternating rounds of 25 ms for about d
// each, so both see the same load.
func measureFloor(size int, d time.Duration) (sign, verify opCost, err error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return sign, verify, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	msg := make([]byte, size)
	if _, err := rand.Read(msg); err != nil {
		return sign, verify, err
	}
	sig := ed25519.Sign(priv, msg)
	type total struct {
		ops       int
		wall, cpu time.Duration
	}
	// round runs op on every core for about r.
	round := func(t *total, r time.Duration, op func() bool) bool {
		n := cores()
		counts := make([]int, n)
		cpus := make([]time.Duration, n)
		ok := make([]bool, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				goruntime.LockOSThread()
				defer goruntime.UnlockOSThread()
				c0 := threadCPU()
				ok[i] = true
				for time.Since(start) < r {
					for range 8 {
						ok[i] = op() && ok[i]
					}
					counts[i] += 8
				}
				cpus[i] = threadCPU() - c0
			}()
		}
		wg.Wait()
		t.wall += time.Since(start) * time.Duration(n)
		for i := range n {
			t.ops += counts[i]
			t.cpu += cpus[i]
			if !ok[i] {
				return false
			}
		}
		return true
	}
	var ts, tv total
	for elapsed := time.Duration(0); elapsed < d; elapsed += 25 * time.Millisecond {
		if !round(&ts, 25*time.Millisecond, func() bool { return len(ed25519.Sign(priv, msg)) == ed25519.SignatureSize }) ||
			!round(&tv, 25*time.Millisecond, func() bool { return ed25519.Verify(pub, msg, sig) }) {
			return sign, verify, fmt.Errorf("crypto floor: a signature did not verify")
		}
	}
	per := func(t total) opCost {
		return opCost{wall: t.wall / time.Duration(t.ops), cpu: t.cpu / time.Duration(t.ops)}
	}
	return per(ts), per(tv), nil
}

// threadCPU is the calling OS thread's user + system time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentiles of ds in milliseconds (nearest rank).
func percentiles(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		i = min(max(i, 0), len(ds)-1)
		return float64(ds[i]) / float64(time.Millisecond)
	}
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(ds[len(ds)-1]) / float64(time.Millisecond)}
}

func loadAverage() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i >= 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}
