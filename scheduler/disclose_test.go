package scheduler_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/scheduler"
)

// otherGroup is everything Group B may differ in between two worlds with the
// same aggregate load (busy slots, active weight).
type otherGroup struct {
	prefix   string
	urgency  scheduler.Urgency
	impact   scheduler.Impact
	estimate int64
	deadline int64 // 0: none
	queued   int
}

// discloseA builds a world with Group A's fixed workload next to Group B's,
// and returns A's disclosures.
func discloseA(t *testing.T, b otherGroup) []scheduler.Disclosure {
	t.Helper()
	s := newSched(t, scheduler.Config{Slots: 3}, map[string]scheduler.GroupConfig{"A": {Weight: 1}, "B": {Weight: 2}})
	bItem := func(id string) scheduler.Item {
		it := scheduler.Item{ID: b.prefix + id, Group: "B", Urgency: b.urgency, Impact: b.impact, Estimate: est(b.estimate)}
		if b.deadline != 0 {
			it.Deadline = at(b.deadline)
		}
		return it
	}
	must(t, s.Enqueue(scheduler.Item{ID: "a-run", Group: "A", Estimate: est(300)}, at(0)))
	if _, ok := s.Next(at(0)); !ok {
		t.Fatal("a-run did not start")
	}
	for i := range 2 {
		must(t, s.Enqueue(bItem(fmt.Sprintf("run%d", i)), at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Group != "B" {
			t.Fatal("B did not start")
		}
	}
	for i := range b.queued {
		must(t, s.Enqueue(bItem(fmt.Sprintf("q%d", i)), at(int64(5+i))))
	}
	urg := []scheduler.Urgency{scheduler.UrgencyLow, scheduler.UrgencyCritical, scheduler.UrgencyNormal}
	for i, u := range urg {
		must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("a%d", i), Group: "A", Urgency: u, Estimate: est(int64(100 * (i + 1)))}, at(10)))
	}
	var out []scheduler.Disclosure
	for _, id := range []string{"a-run", "a0", "a1", "a2"} {
		d, err := s.Disclose(id, at(50))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestDisclosureRevealsNothingOfOtherGroups(t *testing.T) {
	t.Parallel()
	base := discloseA(t, otherGroup{prefix: "b-", urgency: scheduler.UrgencyLow, estimate: 100, queued: 3})
	for _, b := range []otherGroup{
		{prefix: "secret-project-", urgency: scheduler.UrgencyCritical, impact: scheduler.ImpactCritical, estimate: 90_000, deadline: 60, queued: 3},
		{prefix: "x", urgency: scheduler.UrgencyHigh, estimate: 1, queued: 40},
		{prefix: "y", urgency: scheduler.UrgencyNormal, estimate: 5000, deadline: 1_000_000, queued: 1},
	} {
		if got := discloseA(t, b); !reflect.DeepEqual(got, base) {
			t.Fatalf("Group A's disclosure depends on Group B (%+v):\n got %+v\nwant %+v", b, got, base)
		}
	}
	// It is not vacuous: A's own queue order shows in its disclosures.
	crit, low := base[2], base[1]
	if !crit.EstimatedStartWindow.From.Before(low.EstimatedStartWindow.From) {
		t.Fatalf("A's critical item is not disclosed earlier than its low one: %+v vs %+v", crit, low)
	}
	for i, d := range base {
		if d.EstimatedStartWindow.To.Before(d.EstimatedStartWindow.From) || d.EstimatedCompletion.Before(d.EstimatedStartWindow.To) ||
			!d.ComputedAt.Equal(at(50)) || d.Confidence < 0 || d.Confidence > 1 {
			t.Fatalf("disclosure %d inconsistent: %+v", i, d)
		}
	}
	if base[0].CapacityState != scheduler.CapacitySaturated || base[0].EstimatedStartWindow.From != at(0) {
		t.Fatalf("running item: %+v", base[0])
	}
}

func TestDisclosureCapacityStates(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 2}, map[string]scheduler.GroupConfig{"A": {Weight: 1, Quota: 1}, "B": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "a1", Group: "A"}, at(0)))
	if d, _ := s.Disclose("a1", at(0)); d.CapacityState != scheduler.CapacityAvailable {
		t.Fatalf("free slot: %s", d.CapacityState)
	}
	if _, ok := s.Next(at(0)); !ok {
		t.Fatal("no start")
	}
	must(t, s.Enqueue(scheduler.Item{ID: "a2", Group: "A"}, at(1)))
	if d, _ := s.Disclose("a2", at(1)); d.CapacityState != scheduler.CapacitySaturated {
		t.Fatalf("at quota: %s", d.CapacityState)
	}
	must(t, s.Enqueue(scheduler.Item{ID: "b1", Group: "B"}, at(1)))
	must(t, s.Enqueue(scheduler.Item{ID: "b2", Group: "B"}, at(1)))
	if _, ok := s.Next(at(1)); !ok {
		t.Fatal("no start")
	}
	if d, _ := s.Disclose("b2", at(2)); d.CapacityState != scheduler.CapacitySaturated {
		t.Fatalf("all slots busy, B at its share: %s", d.CapacityState)
	}
}

// The window and confidence follow what is known: with a start latency the
// window of an item a free slot takes at once is not a point; the
// caller's observed runs raise the confidence, and the doubt left widens
// the latest start of an item that waits.
func TestDisclosureWindowAndConfidence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		latency   int64 // ms
		observed  int
		busy      bool // one item runs ahead in the only slot
		wantConf  float64
		wantWidth int64 // to − from, ms
	}{
		{"free slot, no latency: a point", 0, 0, false, 0, 0},
		{"free slot: one latency wide", 40, 0, false, 0, 40},
		{"observed runs give confidence", 40, 4, false, 0.5, 40},
		// Waiting behind a 1000 ms run (saturated: half the confidence,
		// a slot wait of the item's own estimate, 1000 ms): from is now +
		// 1000 (ahead) + 40, to is 1000 + 1000 (wait) + 80 + the doubt.
		{"waiting, no history: the whole wait again", 40, 0, true, 0, 2000 + 80 + 2000 - 1040},
		{"waiting, history narrows it", 40, 4, true, 0.25, 2000 + 80 + 1000 - 1040},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"A": {Weight: 1}})
			s.SetStartLatency(est(tc.latency))
			if tc.busy {
				must(t, s.Enqueue(scheduler.Item{ID: "run", Group: "A", Estimate: est(1000)}, at(0)))
				if _, ok := s.Next(at(0)); !ok {
					t.Fatal("no start")
				}
			}
			must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "A", Estimate: est(1000), Observed: tc.observed}, at(0)))
			d, err := s.Disclose("x", at(0))
			must(t, err)
			if d.Confidence != tc.wantConf {
				t.Fatalf("confidence %v, want %v", d.Confidence, tc.wantConf)
			}
			if w := d.EstimatedStartWindow.To.Sub(d.EstimatedStartWindow.From).Milliseconds(); w != tc.wantWidth {
				t.Fatalf("window %+v: %d ms wide, want %d", d.EstimatedStartWindow, w, tc.wantWidth)
			}
			if !d.EstimatedCompletion.Equal(d.EstimatedStartWindow.To.Add(est(1000))) {
				t.Fatalf("completion %v, want the latest start plus the estimate", d.EstimatedCompletion)
			}
		})
	}
}
