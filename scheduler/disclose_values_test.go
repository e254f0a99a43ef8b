package scheduler_test

import (
	"testing"

	"github.com/missionweave/mwp-worker/scheduler"
)

// TestDisclosureValues pins the numbers Disclose gives in one small world,
// each worked out by hand from the rules in disclose.go:
//
//	confidence  n/(n+4) for n observed runs; halved when saturated or
//	            when a running item overruns its estimate; 0 when blocked
//	            or offline
//	from        now + ceil(own work ahead / the Group's quota)
//	to          now + slot wait + ceil(own work ahead / fair share), the
//	            slot wait being the Group's observed mean when no slot is
//	            free; then widened by the estimates' doubt: plus
//	            ceil((1 - n/(n+4)) × (to - now)), n the runs observed
//	            (before any halving), and by the observed start latency
//	            (none here)
//	completion  to + estimate (running: max(start + estimate, now))
//
// Two slots; A and B weigh 1 each, so A's fair share is one slot.
func TestDisclosureValues(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 2}, map[string]scheduler.GroupConfig{"A": {Weight: 1}, "B": {Weight: 1}})
	start := func(want string, now int64) {
		t.Helper()
		if d, ok := s.Next(at(now)); !ok || d.Item != want {
			t.Fatalf("at %d started %+v (%v), want %s", now, d, ok, want)
		}
	}
	// One observed run of A, 200 ms: A's mean is 200, confidence 1/5.
	must(t, s.Enqueue(scheduler.Item{ID: "a-first", Group: "A", Estimate: est(100)}, at(0)))
	start("a-first", 0)
	must(t, s.Finish("a-first", at(200)))
	must(t, s.Enqueue(scheduler.Item{ID: "a-run", Group: "A", Estimate: est(400)}, at(200)))
	start("a-run", 200)
	must(t, s.Enqueue(scheduler.Item{ID: "b-run", Group: "B", Estimate: est(1000)}, at(200)))
	start("b-run", 200)
	must(t, s.Enqueue(scheduler.Item{ID: "a-q1", Group: "A", Estimate: est(300)}, at(210)))
	must(t, s.Enqueue(scheduler.Item{ID: "a-q2", Group: "A", Estimate: est(500)}, at(220)))
	must(t, s.Enqueue(scheduler.Item{ID: "a-blocked", Group: "A", Estimate: est(50), Gates: scheduler.Gates{DependenciesPending: true}}, at(230)))

	type want struct {
		from, to, completion int64
		confidence           float64
		state                scheduler.CapacityState
	}
	check := func(id string, now int64, w want) {
		t.Helper()
		d, err := s.Disclose(id, at(now))
		if err != nil {
			t.Fatal(err)
		}
		got := want{d.EstimatedStartWindow.From.Sub(t0).Milliseconds(), d.EstimatedStartWindow.To.Sub(t0).Milliseconds(),
			d.EstimatedCompletion.Sub(t0).Milliseconds(), d.Confidence, d.CapacityState}
		if got != w || !d.ComputedAt.Equal(at(now)) {
			t.Errorf("%s at %d: %+v, want %+v", id, now, got, w)
		}
	}
	// Running: it started at 200 and should end at 600.
	check("a-run", 250, want{200, 200, 600, 0.2, scheduler.CapacitySaturated})
	// Overrunning: the completion is now, the confidence halved.
	check("a-run", 700, want{200, 200, 700, 0.1, scheduler.CapacitySaturated})
	// a-q1: ahead is what remains of a-run, 600-250 = 350; from 250+350/2,
	// to 250 + 200 (mean) + 350/1 = 800, widened by 0.8 × 550 = 440;
	// completion to + 300; saturated: 0.1.
	check("a-q1", 250, want{425, 800 + 440, 1240 + 300, 0.1, scheduler.CapacitySaturated})
	// a-q2 also waits for a-q1's 300: ahead 650; to 1100 + 0.8 × 850.
	check("a-q2", 250, want{575, 1100 + 680, 1780 + 500, 0.1, scheduler.CapacitySaturated})
	// Blocked: the same arithmetic (ahead 350+300+500), confidence 0.
	check("a-blocked", 250, want{250 + 575, 1600 + 1080, 2680 + 50, 0, scheduler.CapacitySaturated})
	// At exactly its estimated end a-run is not yet overrunning.
	check("a-run", 600, want{200, 200, 600, 0.2, scheduler.CapacitySaturated})
	// B has observed nothing: confidence 0, and its slot wait is the
	// item's own estimate. Ahead: b-run's remaining 950; to 1900, widened
	// by all of its 1650 (nothing observed).
	must(t, s.Enqueue(scheduler.Item{ID: "b-q", Group: "B", Estimate: est(700)}, at(250)))
	check("b-q", 250, want{250 + 475, 1900 + 1650, 3550 + 700, 0, scheduler.CapacitySaturated})
	must(t, s.Remove("b-q"))

	// b-run finishes: a slot is free, and with B idle A's fair share is
	// both slots. a-run has overrun (600 < 1200): none of it is ahead.
	must(t, s.Finish("b-run", at(1200)))
	check("a-q1", 1200, want{1200, 1200, 1500, 0.2, scheduler.CapacityAvailable})
	check("a-q2", 1200, want{1350, 1350 + 120, 1470 + 500, 0.2, scheduler.CapacityAvailable})
	s.SetOffline(true)
	check("a-q1", 1200, want{1200, 1400 + 160, 1560 + 300, 0, scheduler.CapacityOffline})
	s.SetOffline(false)

	// A second observation (a-run ran 1000 ms) moves the mean by an eighth
	// of the difference: 200 + (1000-200)/8 = 300; confidence 2/6. With
	// B busy again A's share is one slot, and 200 ms of a-q1 remain.
	must(t, s.Finish("a-run", at(1200)))
	start("a-q1", 1200)
	must(t, s.Enqueue(scheduler.Item{ID: "b-2", Group: "B", Estimate: est(100)}, at(1200)))
	start("b-2", 1200)
	// to 1800, widened by ceil(4/6 × 500) = 334.
	check("a-q2", 1300, want{1300 + 100, 1800 + 334, 2134 + 500, 0.17, scheduler.CapacitySaturated})
}

// An item whose deadline slack is inside SlackWindow goes ahead of older
// work in its own Group's disclosures; one millisecond later it does not.
func TestDisclosureDeadlineOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		deadline         int64 // of "due", estimate 100: slack ends at deadline-100
		oldFrom, dueFrom int64
	}{
		{"slack ends at now+SlackWindow", 1110, 10100, 10000},
		{"slack ends a millisecond later", 1111, 10000, 10100},
	} {
		s := newSched(t, scheduler.Config{Slots: 1, SlackWindow: est(1000)}, map[string]scheduler.GroupConfig{"A": {Weight: 1}})
		must(t, s.Enqueue(scheduler.Item{ID: "run", Group: "A", Estimate: est(10_000)}, at(0)))
		if _, ok := s.Next(at(0)); !ok {
			t.Fatal("run did not start")
		}
		must(t, s.Enqueue(scheduler.Item{ID: "old", Group: "A", Estimate: est(100)}, at(0)))
		must(t, s.Enqueue(scheduler.Item{ID: "due", Group: "A", Estimate: est(100), Deadline: at(tc.deadline)}, at(5)))
		// At 10, 9990 ms of run remain; one slot, so from = 10 + work ahead.
		for id, want := range map[string]int64{"old": tc.oldFrom, "due": tc.dueFrom} {
			d, err := s.Disclose(id, at(10))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.EstimatedStartWindow.From.Sub(t0).Milliseconds(); got != want {
				t.Errorf("%s: %s from %d, want %d", tc.name, id, got, want)
			}
		}
	}
}

// Next follows the same boundary: the deadline item whose slack ends at
// exactly now + SlackWindow starts before older work, one a millisecond
// later does not.
func TestSlackWindowPromotion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deadline int64
		first    string
	}{{1110, "due"}, {1111, "old"}} {
		s := newSched(t, scheduler.Config{Slots: 1, SlackWindow: est(1000)}, map[string]scheduler.GroupConfig{"A": {Weight: 1}})
		must(t, s.Enqueue(scheduler.Item{ID: "old", Group: "A", Estimate: est(100)}, at(0)))
		must(t, s.Enqueue(scheduler.Item{ID: "due", Group: "A", Estimate: est(100), Deadline: at(tc.deadline)}, at(5)))
		if d, ok := s.Next(at(10)); !ok || d.Item != tc.first {
			t.Errorf("deadline %d: started %+v (%v), want %s", tc.deadline, d, ok, tc.first)
		}
	}
}
