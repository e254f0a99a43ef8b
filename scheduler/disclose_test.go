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
