package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/runtime"
)

func TestSlope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		want   float64
		ok     bool
	}{
		{"a line", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2, true},
		{"flat", []float64{0, 10, 20}, []float64{4, 4, 4}, 0, true},
		{"falling", []float64{1, 2}, []float64{10, 4}, -6, true},
		// Least squares through (0,0) (1,1) (2,0) (3,3): 0.8.
		{"scattered", []float64{0, 1, 2, 3}, []float64{0, 1, 0, 3}, 0.8, true},
		{"one point", []float64{1}, []float64{1}, 0, false},
		{"no spread", []float64{2, 2, 2}, []float64{1, 2, 3}, 0, false},
		{"lengths differ", []float64{1, 2, 3}, []float64{1, 2}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := slope(tc.xs, tc.ys)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("slope %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// sampleAt is a reading at sec seconds with completed items, a worker
// store of base+perItem×completed bytes and goroutines g.
func sampleAt(sec float64, completed int, store int64, g int) Sample {
	return Sample{Kind: "interval", Seconds: sec, Items: SoakItems{Completed: completed},
		Process: Usage{Goroutines: g}, Workers: WorkersUsage{Store: Store{TotalBytes: store}}}
}

// Growth per hour and per item come from the readings after the warm-up
// only; the warm-up's own slope from those before it and the first after.
func TestGrowth(t *testing.T) {
	samples := []Sample{
		sampleAt(0, 0, 1000, 10),
		sampleAt(60, 100, 501000, 40), // warm-up: 5,000 bytes an item, goroutines climbing
		sampleAt(120, 200, 601000, 40),
		sampleAt(180, 300, 701000, 40),
		sampleAt(240, 400, 801000, 40),
	}
	g := growth(samples, 120)
	if g.Samples != 3 || g.WarmupSeconds != 120 {
		t.Fatalf("samples %d, warm-up %v", g.Samples, g.WarmupSeconds)
	}
	for _, c := range []struct {
		name string
		m    map[string]float64
		key  string
		want float64
	}{
		{"per hour", g.PerHour, "workers.store.totalBytes", 100000.0 / 60 * 3600},
		{"per item", g.PerItem, "workers.store.totalBytes", 1000},
		{"goroutines level", g.PerHour, "process.goroutines", 0},
		{"items per hour", g.PerHour, "items.completed", 6000},
		// Warm-up: least squares through (0, 1000), (60, 501000) and
		// (120, 601000): 5,000 bytes a second.
		{"warm-up", g.WarmupPerHour, "workers.store.totalBytes", 5000 * 3600},
	} {
		if got, ok := c.m[c.key]; !ok || math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s %s: %v (%v), want %v", c.name, c.key, got, ok, c.want)
		}
	}
	if _, ok := g.PerItem["items.completed"]; ok {
		t.Error("items.completed per item is listed")
	}
	// Nothing of the authority was measured: no series of it.
	for k := range g.PerHour {
		if strings.HasPrefix(k, "authority.") {
			t.Errorf("%s listed though not measured", k)
		}
	}
	// A reading present in some samples only has no slope.
	v := 3.0
	samples[3].Authority.Goroutines = &v
	if _, ok := growth(samples, 120).PerHour["authority.goroutines"]; ok {
		t.Error("a slope of a reading missing from some samples")
	}
	// Fewer than two readings after the warm-up: no slopes after it.
	if g := growth(samples, 200); g.Samples != 1 || len(g.PerHour) != 0 || len(g.PerItem) != 0 {
		t.Errorf("one reading after the warm-up: %+v", g)
	}
}

func TestGoroutineSides(t *testing.T) {
	dump := strings.Join([]string{
		// The authority's wss stream: its start function is the module's.
		"goroutine 7 [select]:\n" + module + "authority-lite/wss.(*conn).stream(0x1)\n\t/x/wss.go:1 +0x1\ncreated by " + module + "authority-lite/wss.(*conn).run in goroutine 5\n\t/x/wss.go:2 +0x2",
		// An HTTP handler of the authority on net/http's goroutine: the
		// outermost frame of the module names it.
		"goroutine 8 [IO wait]:\nnet.(*conn).Read()\n\t/x\n" + module + "authority-lite/httpapi.(*api).events()\n\t/x\n" + module + "authority-lite/wss.(*Server).ServeHTTP()\n\t/x\nnet/http.(*conn).serve()\n\t/x\ncreated by net/http.(*Server).Serve in goroutine 1\n\t/x",
		// A library's goroutine started by the worker's client.
		"goroutine 9 [select]:\ngithub.com/coder/websocket.(*Conn).timeoutLoop()\n\t/x\ncreated by " + module + "runtime/client.(*Client).dial in goroutine 3\n\t/x",
		// The worker's upload through package remote: the outermost frame
		// (the worker's) names it, not the innermost.
		"goroutine 13 [select]:\n" + module + "remote.(*Authority).PutArtifact()\n\t/x\n" + module + "runtime.(*engine).upload()\n\t/x\ncreated by " + module + "runtime.(*engine).run in goroutine 3\n\t/x",
		"goroutine 10 [chan receive]:\n" + module + "queue.(*Store).writer()\n\t/x\ncreated by " + module + "queue.Open in goroutine 3\n\t/x",
		"goroutine 11 [select]:\n" + module + "internal/bench.(*soak).item()\n\t/x\ncreated by " + module + "internal/bench.(*soak).dispatch in goroutine 4\n\t/x",
		"goroutine 1 [running]:\nmain.main()\n\t/x",
		"goroutine 12 [select]:\ngithub.com/coder/websocket.(*Conn).timeoutLoop()\n\t/x\ncreated by github.com/coder/websocket.newConn in goroutine 8\n\t/x",
	}, "\n\n")
	got := goroutineSides([]byte(dump))
	want := map[string]int{"authority": 2, "workers": 3, "driver": 1, "other": 2}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("sides %v, want %v", got, want)
		}
	}
}

// boltUsage reads what bbolt itself says of its file: the size of the
// used pages and the free ones on the freelist.
func TestBoltUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(from, to int) {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := from; i < to; i++ {
				if err := b.Put([]byte{byte(i >> 8), byte(i)}, make([]byte, 500)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 2000)
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("b")) }); err != nil {
		t.Fatal(err)
	}
	put(0, 10) // a commit after the delete, so its pages are free
	var used int64
	if err := db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	size, gotUsed, free, err := boltUsage(path)
	if err != nil {
		t.Fatal(err)
	}
	// The freelist page lists the free pages and those the last commits
	// freed (pending until no reader needs them).
	st := db.Stats()
	freeN := int64(st.FreePageN+st.PendingPageN) * int64(db.Info().PageSize)
	if gotUsed != used || size < used || free == 0 || free > used {
		t.Fatalf("size %d, used %d (bbolt %d), free %d (bbolt %d free)", size, gotUsed, used, free, freeN)
	}
	if free != freeN {
		t.Fatalf("free %d, bbolt's free pages %d", free, freeN)
	}
}

func TestSoakConfigCheck(t *testing.T) {
	ok := SoakConfig{Duration: time.Minute, Rate: 4, ItemsPerGroup: 10, Groups: 2, Workers: 1, Slots: 1, Interval: time.Second, Warmup: 10 * time.Second}
	for _, tc := range []struct {
		name string
		edit func(*SoakConfig)
		want string // "" valid
	}{
		{"valid", func(*SoakConfig) {}, ""},
		{"by Missions, no duration", func(c *SoakConfig) { c.Duration, c.Warmup, c.StopAfterGroups = 0, 0, 4 }, ""},
		{"no duration", func(c *SoakConfig) { c.Duration = 0 }, "--duration"},
		{"no rate", func(c *SoakConfig) { c.Rate = 0 }, "--rate"},
		{"NaN rate", func(c *SoakConfig) { c.Rate = math.NaN() }, "--rate"},
		{"no items", func(c *SoakConfig) { c.ItemsPerGroup = 0 }, "--items-per-group"},
		{"no groups", func(c *SoakConfig) { c.Groups = 0 }, "--groups"},
		{"no interval", func(c *SoakConfig) { c.Interval = 0 }, "--interval"},
		{"warm-up too long", func(c *SoakConfig) { c.Warmup = time.Minute }, "--warmup"},
		{"stop not a multiple", func(c *SoakConfig) { c.StopAfterGroups = 3 }, "not a multiple of --groups 2"},
		{"mark not a multiple", func(c *SoakConfig) { c.MarkEveryGroups = 1 }, "not a multiple of --groups 2"},
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

// jsonKeys are the members of v's JSON object, sorted.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A soak by Missions: every item verified, every Mission that got items
// approved, a mark after each two with nothing in flight, and readings of
// the documented shape (docs/shapes.md, "mwp-worker bench --duration").
func TestSoakMissions(t *testing.T) {
	var samples []Sample
	var tunedAuthority, tunedWorkers []string
	tune := &Tuning{Authority: func(c *embed.Config) { tunedAuthority = append(tunedAuthority, filepath.Base(c.Dir)) },
		Worker: func(c *runtime.WorkerConfig) { tunedWorkers = append(tunedWorkers, c.AgentID) }}
	rate := goruntime.MemProfileRate
	t.Cleanup(func() { goruntime.MemProfileRate = rate })
	profiles := filepath.Join(t.TempDir(), "profiles")
	final, err := Soak(context.Background(), SoakConfig{Rate: 500, ItemsPerGroup: 6, Groups: 1, Workers: 2, Slots: 4, Interval: time.Hour,
		StopAfterGroups: 4, MarkEveryGroups: 2, Dir: t.TempDir(), Tune: tune, OnSample: func(s Sample) { samples = append(samples, s) },
		HeapProfileDir: profiles})
	if err != nil {
		t.Fatal(err)
	}
	// One heap profile a reading, named in order.
	var names []string
	if es, err := os.ReadDir(profiles); err == nil {
		for _, e := range es {
			if b, err := os.ReadFile(filepath.Join(profiles, e.Name())); err == nil && len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
				names = append(names, e.Name()[:len("heap-000")])
			}
		}
	}
	if !slices.Equal(names, []string{"heap-000", "heap-001", "heap-002"}) {
		t.Fatalf("heap profiles %v, want one gzip file per reading", names)
	}
	if !slices.Equal(tunedAuthority, []string{"authority"}) || !slices.Equal(tunedWorkers, []string{"w1", "w2"}) {
		t.Fatalf("tuned the authority %v, the workers %v", tunedAuthority, tunedWorkers)
	}
	var kinds []string
	for _, s := range samples {
		kinds = append(kinds, s.Kind)
	}
	if !slices.Equal(kinds, []string{"start", "mark", "final"}) {
		t.Fatalf("readings %v", kinds)
	}
	mark := samples[1]
	switch {
	case mark.Items.Completed != 12 || mark.Items.InFlight != 0 || mark.Groups.Finished != 2 || mark.Groups.Open != 1:
		t.Fatalf("mark: items %+v, groups %+v", mark.Items, mark.Groups)
	case final.Items.Completed != 24 || final.Items.Started != 24 || final.Groups.Finished != 4 || final.Groups.Open != 1:
		t.Fatalf("final: items %+v, groups %+v", final.Items, final.Groups)
	case final.Authority.Source != "process" || final.Authority.Store == nil || final.Authority.LogEvents == nil || mark.Authority.LogEvents == nil ||
		*final.Authority.LogEvents <= *mark.Authority.LogEvents:
		t.Fatalf("authority %+v", final.Authority)
	case final.Workers.Count != 2 || final.Workers.Store.DBUsedBytes <= 0 || final.Process.Goroutines <= 0 || final.Process.OpenFiles <= 0 || final.Process.HeapInuseBytes == 0:
		t.Fatalf("workers %+v, process %+v", final.Workers, final.Process)
	case final.Run == nil || final.Growth == nil || final.Run.Authority != "embedded" || final.Growth.Samples != 3:
		t.Fatalf("run %+v, growth %+v", final.Run, final.Growth)
	}
	for _, c := range []struct {
		v    any
		want []string
	}{
		{mark, []string{"authority", "groups", "items", "kind", "process", "seconds", "workers"}},
		{final, []string{"authority", "groups", "growth", "items", "kind", "notes", "process", "run", "seconds", "workers"}},
		{final.Items, []string{"completed", "endToEndMs", "inFlight", "maxLateMs", "started"}},
		{final.Process, []string{"goroutines", "goroutinesBy", "heapInuseBytes", "openFiles", "rssBytes"}},
		{final.Authority, []string{"connections", "goroutines", "groups", "heapInuseBytes", "logEvents", "openFiles", "rssBytes", "source", "store"}},
		{final.Workers, []string{"count", "goroutines", "store"}},
		{final.Workers.Store, []string{"dbFileBytes", "dbFreeBytes", "dbUsedBytes", "dirs", "totalBytes"}},
		{final.Growth, []string{"perHour", "perItem", "samples", "warmupPerHour", "warmupSeconds"}},
		{final.Run, []string{"authority", "fsync", "groups", "intervalSeconds", "itemsPerGroup", "rate", "seconds", "slots", "workers"}},
	} {
		if got := jsonKeys(t, c.v); !slices.Equal(got, c.want) {
			t.Errorf("%T members %v, want %v", c.v, got, c.want)
		}
	}
	if got := jsonKeys(t, final.Authority.Store.Dirs); !slices.Equal(got, []string{"artifacts", "snapshots"}) {
		t.Errorf("authority dirs %v", got)
	}
}
