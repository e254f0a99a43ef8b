package scheduler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// Fits: a zero field of a slot is no limit; a need equal to the capacity fits.
func TestResourcesFits(t *testing.T) {
	t.Parallel()
	type r = scheduler.Resources
	for _, tc := range []struct {
		slot, need r
		want       bool
	}{
		{r{}, r{MilliCPU: 64_000, MemoryMiB: 1 << 20}, true},
		{r{MilliCPU: 1000, MemoryMiB: 512}, r{MilliCPU: 1000, MemoryMiB: 512}, true},
		{r{MilliCPU: 1000, MemoryMiB: 512}, r{MilliCPU: 1001}, false},
		{r{MilliCPU: 1000, MemoryMiB: 512}, r{MemoryMiB: 513}, false},
		{r{MemoryMiB: 512}, r{MilliCPU: 5000, MemoryMiB: 100}, true},
		{r{MilliCPU: 1000}, r{MilliCPU: 500, MemoryMiB: 1 << 20}, true},
	} {
		if got := tc.slot.Fits(tc.need); got != tc.want {
			t.Errorf("%+v.Fits(%+v) = %v, want %v", tc.slot, tc.need, got, tc.want)
		}
	}
}

// With unlike slots an item takes the smallest free slot it fits, a slot's
// zero field counting as the largest; among equals the first. An item no
// slot fits is blocked on resources, whichever slot comes first.
func TestUnlikeSlots(t *testing.T) {
	t.Parallel()
	type r = scheduler.Resources
	for _, tc := range []struct {
		name  string
		slots []r
		need  r
		want  int // the slot; -1 for blocked on resources
	}{
		{"the first is the smaller", []r{{MilliCPU: 1000}, {MilliCPU: 2000}}, r{MilliCPU: 500}, 0},
		{"the second is the smaller", []r{{MilliCPU: 2000}, {MilliCPU: 1000}}, r{MilliCPU: 500}, 1},
		{"a limit is smaller than none", []r{{}, {MilliCPU: 2000}}, r{MilliCPU: 500}, 1},
		{"equal CPU, the smaller memory", []r{{MilliCPU: 1000, MemoryMiB: 2048}, {MilliCPU: 1000, MemoryMiB: 1024}}, r{MilliCPU: 500}, 1},
		{"equal CPU, a memory limit is smaller than none", []r{{MilliCPU: 1000}, {MilliCPU: 1000, MemoryMiB: 2048}}, r{MilliCPU: 500}, 1},
		{"equal slots: the first", []r{{MilliCPU: 1000, MemoryMiB: 1024}, {MilliCPU: 1000, MemoryMiB: 1024}, {MilliCPU: 2000}}, r{MilliCPU: 500}, 0},
		{"only the second fits", []r{{MilliCPU: 1000}, {MilliCPU: 2000}}, r{MilliCPU: 1500}, 1},
		{"none fits", []r{{MilliCPU: 1000}, {MilliCPU: 2000}}, r{MilliCPU: 3000}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSched(t, scheduler.Config{Slots: len(tc.slots), SlotResources: tc.slots}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
			must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g", Resources: tc.need}, at(0)))
			d, ok := s.Next(at(0))
			if tc.want < 0 {
				st, _ := s.Status("x")
				if ok || st.State != scheduler.StateBlocked || st.Blockers != scheduler.BlockedResources {
					t.Fatalf("started %+v %v, status %+v; want blocked on resources", d, ok, st)
				}
				return
			}
			if !ok || d.Slot != tc.want {
				t.Fatalf("%+v %v, want slot %d", d, ok, tc.want)
			}
		})
	}
}

// Status names the slot of a running item only; Len counts queued and
// running items apart.
func TestStatusSlotAndLen(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 2}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		must(t, s.Enqueue(scheduler.Item{ID: id, Group: "g", Estimate: est(100)}, at(0)))
	}
	slot := func(id string) int {
		t.Helper()
		st, ok := s.Status(id)
		if !ok {
			t.Fatalf("%s unknown", id)
		}
		return st.Slot
	}
	if got := slot("a"); got != -1 {
		t.Fatalf("queued a in slot %d, want -1", got)
	}
	for range 2 {
		if _, ok := s.Next(at(0)); !ok {
			t.Fatal("nothing started")
		}
	}
	if q, r := s.Len(); q != 3 || r != 2 {
		t.Fatalf("Len %d queued, %d running; want 3, 2", q, r)
	}
	if got := slot("b"); got != 1 {
		t.Fatalf("running b in slot %d, want 1", got)
	}
	must(t, s.Release("b", at(10)))
	if got := slot("b"); got != -1 {
		t.Fatalf("released b in slot %d, want -1", got)
	}
	if q, r := s.Len(); q != 4 || r != 1 {
		t.Fatalf("Len %d queued, %d running; want 4, 1", q, r)
	}
}

// The wire spellings of urgency and impact read back; a value past the last
// prints as a number.
func TestNames(t *testing.T) {
	t.Parallel()
	for _, u := range []scheduler.Urgency{scheduler.UrgencyLow, scheduler.UrgencyNormal, scheduler.UrgencyHigh, scheduler.UrgencyCritical} {
		if got, err := scheduler.ParseUrgency(u.String()); err != nil || got != u {
			t.Errorf("ParseUrgency(%q) = %v, %v", u.String(), got, err)
		}
	}
	for _, i := range []scheduler.Impact{scheduler.ImpactLow, scheduler.ImpactMedium, scheduler.ImpactHigh, scheduler.ImpactCritical} {
		if got, err := scheduler.ParseImpact(i.String()); err != nil || got != i {
			t.Errorf("ParseImpact(%q) = %v, %v", i.String(), got, err)
		}
	}
	if _, err := scheduler.ParseUrgency("urgent"); err == nil {
		t.Error("ParseUrgency(urgent): no error")
	}
	if _, err := scheduler.ParseImpact("severe"); err == nil {
		t.Error("ParseImpact(severe): no error")
	}
	for _, tc := range []struct{ got, want string }{
		{(scheduler.UrgencyCritical + 1).String(), "Urgency(4)"},
		{(scheduler.ImpactCritical + 1).String(), "Impact(4)"},
		{scheduler.Blockers(0).String(), "none"},
		{scheduler.BlockedApproval.String(), "approval"},
		{(scheduler.BlockedDependencies | scheduler.BlockedResources).String(), "dependencies,resources"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

// An item without an estimate is expected to run as long as its Group's
// finished items did on average, or DefaultEstimate before any finished.
func TestEstimateFromObservedRuns(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1, DefaultEstimate: 250 * time.Millisecond}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	cost := func(id string, now int64) int64 {
		t.Helper()
		must(t, s.Enqueue(scheduler.Item{ID: id, Group: "g"}, at(now)))
		d, ok := s.Next(at(now))
		if !ok || d.Item != id {
			t.Fatalf("%+v %v, want %s started", d, ok, id)
		}
		return d.Basis.ExpectedCost
	}
	if got := cost("first", 0); got != 250 {
		t.Fatalf("first expected cost %d, want the default 250", got)
	}
	must(t, s.Finish("first", at(40)))
	if got := cost("second", 40); got != 40 {
		t.Fatalf("second expected cost %d, want the observed 40", got)
	}
}

// A priority class past the last is refused, as is a weight past the bound.
func TestGroupConfigBounds(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, nil)
	if err := s.SetGroup("c", scheduler.GroupConfig{Weight: 1, Class: scheduler.ClassCritical + 1}); !errors.Is(err, scheduler.ErrInvalid) {
		t.Errorf("class past the last: %v, want ErrInvalid", err)
	}
	must(t, s.SetGroup("c", scheduler.GroupConfig{Weight: 1, Class: scheduler.ClassCritical}))
}
