package bench

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/runtime"
)

// soakThird is how many Missions each third of TestSoakLevelsOff runs.
const soakThird = 4

// soakRetain is the events the soak's authority keeps per Group: fewer
// than one Mission appends (about 70), so retention compacts while a
// Mission runs as well as when it is archived.
const soakRetain = 20

// Tolerances of TestSoakLevelsOff: what finished Missions may still add.
const (
	// goroutineTolerance is how many more goroutines the authority and the
	// workers may hold after the last two thirds than after the first (a timer or a
	// connection's helper that happens to be alive), well under one per
	// finished Mission and worker (2×soakThird×2 = 16 on a build that
	// keeps a stream per connection and Group).
	goroutineTolerance = 2
	// storeTolerance is the part of the first third's store growth (its
	// high-water mark: what the Missions took while they ran) that the
	// last third may add to the data the store still holds (liveSize):
	// retention, archiving, purging and forgetting leave nearly nothing
	// of a finished Mission. A purged Group leaves its id in the
	// authority's log (about 30 bytes), a forgotten one a tombstone in a
	// worker's store (about 150 bytes); measured 0.00× for both, and a
	// leak of two pages a Mission fails it. It is the 5% goal.
	storeTolerance = 0.05
)

// A soak counted in Missions, never in time: three thirds of soakThird
// Missions of 10 items each, each third finished and settled (every item
// verified, every Mission approved, the workers caught up with no slot
// busy and the goroutines steady) before it is read. Missions that have
// finished must cost nothing that stays: the goroutines of the authority
// and the workers (all but the driver's) after the third third are those
// after the first, and the data the stores hold (the bbolt pages in use
// less the free ones, plus the checkpoint, artifact, work and snapshot
// directories) grows in the third third by at most storeTolerance of what
// the stores grew to (high-water mark) in the first.
//
// The authority retains soakRetain events per Group, archives a finished
// Group at once, purges it at once and drops the receipts no retry needs
// at once; the workers forget it at once, and every reading waits until
// each finished Group is purged and forgotten (SettleFinished): what is
// left then is what a finished Mission leaves for good, whatever the
// delays an operator sets.
func TestSoakLevelsOff(t *testing.T) {
	var marks []Sample
	final, err := Soak(context.Background(), SoakConfig{Rate: 500, ItemsPerGroup: 10, Groups: 1, Workers: 2, Slots: 4, Interval: time.Hour,
		StopAfterGroups: 3 * soakThird, MarkEveryGroups: soakThird, Dir: t.TempDir(), SettleFinished: true,
		Tune: &Tuning{
			Authority: func(c *embed.Config) {
				c.RetainEvents, c.ArchiveAfter, c.PurgeAfter, c.ReceiptWindow = soakRetain, time.Nanosecond, time.Nanosecond, time.Nanosecond
			},
			Worker: func(c *runtime.WorkerConfig) { c.ForgetGrace = time.Nanosecond },
		},
		OnSample: func(s Sample) {
			if s.Kind == "start" || s.Kind == "mark" {
				marks = append(marks, s)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 3 || marks[1].Groups.Finished != soakThird || marks[2].Groups.Finished != 2*soakThird || final.Groups.Finished != 3*soakThird {
		t.Fatalf("readings at %d marks; Missions finished %d, %d, %d", len(marks), marks[1].Groups.Finished, marks[2].Groups.Finished, final.Groups.Finished)
	}
	start, first, second := marks[0], marks[1], marks[2]
	for _, s := range []Sample{start, first, second, *final} {
		t.Logf("%-5s Missions %2d, items %3d: goroutines %d %v, heap %d, authority store %d (db %d in use, %d free, dirs %v), workers' store %d (db %d in use, %d free, dirs %v)",
			s.Kind, s.Groups.Finished, s.Items.Completed, s.Process.Goroutines, s.Process.GoroutinesBy, s.Process.HeapInuseBytes,
			storeSize(*s.Authority.Store), s.Authority.Store.DBUsedBytes, s.Authority.Store.DBFreeBytes, s.Authority.Store.Dirs, storeSize(s.Workers.Store), s.Workers.Store.DBUsedBytes, s.Workers.Store.DBFreeBytes, s.Workers.Store.Dirs)
	}

	// The driver's own goroutines (its dispatcher and sampler run at a mark,
	// not at the end) are left out.
	served := func(s Sample) int { return s.Process.Goroutines - s.Process.GoroutinesBy["driver"] }
	if grew := served(*final) - served(first); grew > goroutineTolerance {
		t.Errorf("the authority's and workers' goroutines grew by %d over %d finished Missions (after the first %d: %v; at the end: %v), more than %d",
			grew, 2*soakThird, soakThird, first.Process.GoroutinesBy, final.Process.GoroutinesBy, goroutineTolerance)
	}
	for _, st := range []struct {
		name                        string
		start, first, second, final Store
		tolerance                   float64
	}{
		{"authority", *start.Authority.Store, *first.Authority.Store, *second.Authority.Store, *final.Authority.Store, storeTolerance},
		{"workers'", start.Workers.Store, first.Workers.Store, second.Workers.Store, final.Workers.Store, storeTolerance},
	} {
		firstGrew := storeSize(st.first) - storeSize(st.start)
		lastGrew := liveSize(st.final) - liveSize(st.second)
		if float64(lastGrew) > st.tolerance*float64(firstGrew) {
			t.Errorf("the %s store's live data grew %d bytes over the last %d Missions, %.3f× the store's %d growth over the first %d (at most %.2f×)",
				st.name, lastGrew, soakThird, float64(lastGrew)/float64(firstGrew), firstGrew, soakThird, st.tolerance)
		}
	}
}

// storeSize is what a store takes: its bbolt pages up to the high-water
// mark and its directories' files.
func storeSize(s Store) int64 {
	n := s.DBUsedBytes
	for _, v := range s.Dirs {
		n += v
	}
	return n
}

// liveSize is what a store holds: its bbolt pages in use less those on
// its freelist, and its directories' files. Unlike the high-water mark, it
// does not jump when bbolt happens to extend the file for a run of pages
// its free ones cannot serve.
func liveSize(s Store) int64 {
	return storeSize(s) - s.DBFreeBytes
}
