package scheduler_test

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// What a disclosed start counts as ahead (one free slot: the start is now
// plus the estimates ahead): inside the slack window items go by deadline,
// even against aging order; at equal aging keys by arrival.
func TestDisclosureAheadOrder(t *testing.T) {
	t.Parallel()
	type item struct {
		id       string
		estimate int64
		deadline int64 // ms; 0 for none
	}
	for _, tc := range []struct {
		name  string
		items []item // enqueued in order, 1 ms apart unless same
		same  bool   // enqueued at the same instant
		ahead map[string]int64
	}{
		{"deadlines inside the slack window, against aging order",
			[]item{{"late", 100, 2000}, {"early", 300, 1500}}, false,
			map[string]int64{"late": 300, "early": 0}},
		{"equal aging keys: by arrival",
			[]item{{"first", 100, 0}, {"second", 300, 0}}, true,
			map[string]int64{"first": 0, "second": 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
			for i, it := range tc.items {
				var dl time.Time
				if it.deadline > 0 {
					dl = at(it.deadline)
				}
				when := int64(i)
				if tc.same {
					when = 0
				}
				must(t, s.Enqueue(scheduler.Item{ID: it.id, Group: "g", Estimate: est(it.estimate), Deadline: dl}, at(when)))
			}
			for id, want := range tc.ahead {
				d, err := s.Disclose(id, at(10))
				must(t, err)
				if got := d.EstimatedStartWindow.From.Sub(at(10)).Milliseconds(); got != want {
					t.Errorf("%s: starts %d ms from now, want %d", id, got, want)
				}
			}
		})
	}
}

// A Group below its share of slots, all of them busy, gets the next fitting
// slot: constrained, not saturated, also while it runs items of its own.
func TestDisclosureConstrainedWhileRunning(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 4}, map[string]scheduler.GroupConfig{"A": {Weight: 1}, "B": {Weight: 1}})
	for _, it := range []scheduler.Item{{ID: "a1", Group: "A"}, {ID: "b1", Group: "B"}, {ID: "b2", Group: "B"}, {ID: "b3", Group: "B"}} {
		must(t, s.Enqueue(it, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != it.ID {
			t.Fatalf("setup: %+v %v, want %s", d, ok, it.ID)
		}
	}
	must(t, s.Enqueue(scheduler.Item{ID: "a2", Group: "A"}, at(1)))
	d, err := s.Disclose("a2", at(2))
	must(t, err)
	if d.CapacityState != scheduler.CapacityConstrained {
		t.Fatalf("A holds 1 of 4 slots, its share 2: %s, want constrained", d.CapacityState)
	}
}
