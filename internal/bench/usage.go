package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What a soak reads of the processes and stores it runs, every interval
// (docs/shapes.md, "mwp-worker bench --duration").

// Usage is one process's resources.
type Usage struct {
	// HeapInuseBytes is runtime.MemStats.HeapInuse right after a forced
	// garbage collection: the live heap and its fragmentation, not garbage.
	HeapInuseBytes uint64 `json:"heapInuseBytes"`
	Goroutines     int    `json:"goroutines"`
	// GoroutinesBy splits Goroutines by whose code started them (see
	// goroutineSides): authority, workers, driver, other.
	GoroutinesBy map[string]int `json:"goroutinesBy"`
	OpenFiles    int            `json:"openFiles"` // entries of /proc/self/fd
	RSSBytes     uint64         `json:"rssBytes"`  // VmRSS of /proc/self/status
}

// Store is what a data directory holds on disk.
type Store struct {
	// DBFileBytes is the bbolt file's size (authority.db, or every
	// worker.db summed); DBUsedBytes its pages up to the high-water mark of
	// the last commit, DBFreeBytes those of them on its freelist: free, or
	// freed by the last commits (reused once no reader needs them), all
	// reused before the file grows. bbolt grows the file in steps ahead of use,
	// so DBUsedBytes is the finer measure of growth.
	DBFileBytes int64 `json:"dbFileBytes"`
	DBUsedBytes int64 `json:"dbUsedBytes"`
	DBFreeBytes int64 `json:"dbFreeBytes"`
	// Dirs is the bytes of the files under each subdirectory (authority:
	// snapshots, artifacts; worker: checkpoints, artifacts, work), 0 when
	// absent.
	Dirs map[string]int64 `json:"dirs"`
	// TotalBytes is every file under the data directory (or directories).
	TotalBytes int64 `json:"totalBytes"`
}

// AuthorityUsage is the authority's side. Embedded, it shares this
// process: heap, open files and RSS are the process's (Usage) and only
// its goroutines, store and log are told apart. Running elsewhere, what
// its /metrics exports is read (null: not exported, or no --authority-metrics).
type AuthorityUsage struct {
	// Source is "process" (embedded), "metrics" (read from the
	// authority's /metrics) or "none" (a running authority whose metrics
	// were not given).
	Source         string   `json:"source"`
	HeapInuseBytes *float64 `json:"heapInuseBytes"` // go_memstats_heap_inuse_bytes
	Goroutines     *float64 `json:"goroutines"`     // go_goroutines, or embedded those its code started
	OpenFiles      *float64 `json:"openFiles"`      // process_open_fds
	RSSBytes       *float64 `json:"rssBytes"`       // process_resident_memory_bytes
	LogEvents      *float64 `json:"logEvents"`      // mwp_authority_log_events
	Groups         *float64 `json:"groups"`         // mwp_authority_groups
	Connections    *float64 `json:"connections"`    // mwp_authority_connections{state="in_session"} (authority serve only)
	Store          *Store   `json:"store"`          // null: not on this host
}

// WorkersUsage is the workers' side: always in this process.
type WorkersUsage struct {
	Count      int   `json:"count"`
	Goroutines int   `json:"goroutines"` // those the worker's code started
	Store      Store `json:"store"`      // every worker's directory summed
}

// readProcess reads this process's resources, forcing a garbage
// collection first so that the heap is what is live.
func readProcess() (Usage, error) {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	u := Usage{HeapInuseBytes: ms.HeapInuse, Goroutines: goruntime.NumGoroutine(), GoroutinesBy: goroutineSides(allStacks())}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return u, fmt.Errorf("open files are read from /proc/self/fd: %w", err)
	}
	u.OpenFiles = len(fds)
	u.RSSBytes, err = rss()
	return u, err
}

func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// rss is VmRSS of /proc/self/status in bytes.
func rss() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("RSS is read from /proc/self/status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

const module = "github.com/missionweave/mwp-worker/"

// goroutineSides counts the goroutines of a runtime.Stack(all) dump by
// the side whose code runs them: the outermost frame of this module on the
// goroutine's stack, else the function that created it, names the side;
// one with neither (a library's or the Go runtime's own) is "other".
func goroutineSides(dump []byte) map[string]int {
	out := map[string]int{"authority": 0, "workers": 0, "driver": 0, "other": 0}
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		side := ""
		for _, line := range strings.Split(string(g), "\n") {
			if line == "" || line[0] == '\t' || strings.HasPrefix(line, "goroutine ") {
				continue
			}
			if creator, ok := strings.CutPrefix(line, "created by "); ok {
				if side == "" {
					side = sideOf(creator)
				}
				break
			}
			if s := sideOf(line); s != "" {
				side = s // the outermost one wins: later lines are outer frames
			}
		}
		if side == "" {
			side = "other"
		}
		out[side]++
	}
	return out
}

// sideOf is the side of a function of this module ("" for any other).
func sideOf(fn string) string {
	rest, ok := strings.CutPrefix(fn, module)
	if !ok {
		return ""
	}
	pkg, _, _ := strings.Cut(rest, ".")
	switch top, _, _ := strings.Cut(pkg, "/"); top {
	case "authority-lite", "group":
		return "authority"
	case "runtime", "queue", "slots", "checkpoint", "offline", "scheduler", "toolkeys":
		return "workers"
	case "internal", "remote":
		if strings.HasPrefix(pkg, "internal/bench") || top == "remote" {
			return "driver"
		}
	}
	return ""
}

// storeUsage measures a data directory: its bbolt file db (a name under
// dir) and the files under each of subdirs and in all.
func storeUsage(dir, db string, subdirs []string) (Store, error) {
	s := Store{Dirs: map[string]int64{}}
	var err error
	if s.DBFileBytes, s.DBUsedBytes, s.DBFreeBytes, err = boltUsage(filepath.Join(dir, db)); err != nil {
		return s, err
	}
	for _, sub := range subdirs {
		if s.Dirs[sub], err = dirBytes(filepath.Join(dir, sub)); err != nil {
			return s, err
		}
	}
	s.TotalBytes, err = dirBytes(dir)
	return s, err
}

func (s *Store) add(o Store) {
	s.DBFileBytes += o.DBFileBytes
	s.DBUsedBytes += o.DBUsedBytes
	s.DBFreeBytes += o.DBFreeBytes
	s.TotalBytes += o.TotalBytes
	if s.Dirs == nil {
		s.Dirs = map[string]int64{}
	}
	for k, v := range o.Dirs {
		s.Dirs[k] += v
	}
}

// dirBytes sums the sizes of the regular files under dir (0 when absent).
// A file removed while it walks is skipped.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}

// boltUsage reads a bbolt file's size, its pages up to the high-water
// mark and the free pages its freelist lists, from the valid meta page of
// the last commit (layout: boltTxID) and its freelist page: a 16-byte
// header (id, flags, count, overflow) then the free page ids; a count of
// 0xFFFF means the real count is the first id. A file opened with
// NoFreelistSync has no freelist page: free is then 0.
func boltUsage(path string) (size, used, free int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	m, err := readMeta(f)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	size, used = st.Size(), int64(m.highWater)*int64(m.pageSize)
	if m.freelist >= m.highWater { // none stored
		return size, used, 0, nil
	}
	hdr := make([]byte, 24)
	if _, err := f.ReadAt(hdr, int64(m.freelist)*int64(m.pageSize)); err != nil && err != io.EOF {
		return size, used, 0, err
	}
	n := uint64(binary.LittleEndian.Uint16(hdr[10:]))
	if n == 0xFFFF {
		n = binary.LittleEndian.Uint64(hdr[16:])
	}
	return size, used, int64(n) * int64(m.pageSize), nil
}

// meta is what a valid bbolt meta page says.
type meta struct {
	pageSize            uint32
	freelist, highWater uint64
	txid                uint64
}

// readMeta reads the valid meta page with the larger txid. Layout (bbolt
// 1.x): a 16-byte page header, then magic, version, pageSize, flags (4
// bytes each), root (16), freelist, pgid (the high-water mark), txid and
// checksum (8 each), the checksum being FNV-1a of the meta before it.
func readMeta(f *os.File) (meta, error) {
	const hdr, magic = 16, 0xED0CDAED
	read := func(off int64) (meta, bool) {
		b := make([]byte, 64)
		if _, err := f.ReadAt(b, off+hdr); err != nil {
			return meta{}, false
		}
		if binary.LittleEndian.Uint32(b[0:]) != magic || fnv64a(b[:56]) != binary.LittleEndian.Uint64(b[56:]) {
			return meta{}, false
		}
		return meta{pageSize: binary.LittleEndian.Uint32(b[8:]), freelist: binary.LittleEndian.Uint64(b[32:]),
			highWater: binary.LittleEndian.Uint64(b[40:]), txid: binary.LittleEndian.Uint64(b[48:])}, true
	}
	m0, ok0 := read(0)
	ps := int64(os.Getpagesize())
	if ok0 {
		ps = int64(m0.pageSize)
	}
	m1, ok1 := read(ps)
	switch {
	case !ok0 && !ok1:
		return meta{}, fmt.Errorf("no valid bbolt meta page")
	case !ok1 || (ok0 && m0.txid > m1.txid):
		return m0, nil
	}
	return m1, nil
}

func fnv64a(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// metricsUsage reads a running authority's resources from its Prometheus
// text at url (authority serve --metrics-listen: the Go and process
// collectors are registered there).
func metricsUsage(ctx context.Context, client *http.Client, url string) (AuthorityUsage, error) {
	u := AuthorityUsage{Source: "metrics"}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return u, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return u, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return u, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		return u, fmt.Errorf("%s: %w", url, err)
	}
	// value sums a family's samples whose labels include want.
	value := func(name string, want ...string) *float64 {
		f := fams[name]
		if f == nil {
			return nil
		}
		var v float64
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if len(want) == 2 && labels[want[0]] != want[1] {
				continue
			}
			switch {
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Untyped != nil:
				v += m.Untyped.GetValue()
			}
		}
		return &v
	}
	u.HeapInuseBytes = value("go_memstats_heap_inuse_bytes")
	u.Goroutines = value("go_goroutines")
	u.OpenFiles = value("process_open_fds")
	u.RSSBytes = value("process_resident_memory_bytes")
	u.LogEvents = value("mwp_authority_log_events")
	u.Groups = value("mwp_authority_groups")
	u.Connections = value("mwp_authority_connections", "state", "in_session")
	return u, nil
}

func f64(v float64) *float64 { return &v }
