package scheduler_test

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// The slot a victim releases goes to the item it was preempted for, although
// Next alone would pick another Group's item (behind in virtual time); the
// next preemption may then be named.
func TestHandoffToTheCandidate(t *testing.T) {
	t.Parallel()
	cfg := scheduler.Config{Slots: 1, MaxWait: [4]time.Duration{scheduler.UrgencyCritical: time.Millisecond}}
	s := newSched(t, cfg, map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "r", Group: "a", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)}, at(0)))
	if d, ok := s.Next(at(0)); !ok || d.Item != "r" {
		t.Fatalf("setup: %+v %v", d, ok)
	}
	must(t, s.Enqueue(scheduler.Item{ID: "w", Group: "b", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(100)}, at(5)))
	must(t, s.Enqueue(scheduler.Item{ID: "c", Group: "a", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(5)))
	p, ok := s.Preempt(at(10))
	if !ok || p.Item != "r" || p.For != "c" {
		t.Fatalf("preemption %+v %v, want r for c", p, ok)
	}
	must(t, s.Release("r", at(20)))
	d, ok := s.Next(at(20))
	if !ok || d.Item != "c" || d.Basis.PolicyRulesApplied&scheduler.RulePreemptLowestPriority == 0 {
		t.Fatalf("after release: %+v %v, want c handed the slot", d, ok)
	}
	// Without the handoff, b (not charged yet) goes first.
	must(t, s.Finish("c", at(120)))
	if d, ok := s.Next(at(120)); !ok || d.Item != "w" {
		t.Fatalf("next: %+v %v, want w", d, ok)
	}
	must(t, s.Enqueue(scheduler.Item{ID: "c2", Group: "b", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(150)))
	if p, ok := s.Preempt(at(200)); !ok || p.Item != "w" || p.For != "c2" {
		t.Fatalf("second preemption %+v %v, want w for c2", p, ok)
	}
}

// A Group whose quota was lowered while its victim checkpointed does not
// get the handed-off slot past the new quota.
func TestHandoffKeepsTheQuota(t *testing.T) {
	t.Parallel()
	cfg := scheduler.Config{Slots: 2, MaxWait: [4]time.Duration{scheduler.UrgencyCritical: time.Millisecond}}
	s := newSched(t, cfg, map[string]scheduler.GroupConfig{"a": {Weight: 1, Quota: 2}})
	for _, it := range []scheduler.Item{
		{ID: "a1", Group: "a", Estimate: est(1000)},
		{ID: "r", Group: "a", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)},
	} {
		must(t, s.Enqueue(it, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != it.ID {
			t.Fatalf("setup: %+v %v", d, ok)
		}
	}
	must(t, s.Enqueue(scheduler.Item{ID: "c", Group: "a", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(5)))
	if p, ok := s.Preempt(at(10)); !ok || p.Item != "r" || p.For != "c" {
		t.Fatalf("preemption %+v %v, want r for c", p, ok)
	}
	must(t, s.SetGroup("a", scheduler.GroupConfig{Weight: 1, Quota: 1}))
	must(t, s.Release("r", at(20)))
	if d, ok := s.Next(at(20)); ok {
		t.Fatalf("started %+v with a at its quota", d)
	}
	must(t, s.Finish("a1", at(30)))
	if d, ok := s.Next(at(30)); !ok || d.Item != "c" {
		t.Fatalf("after a1: %+v %v, want c", d, ok)
	}
}

// A handoff whose candidate has meanwhile started in another slot is
// dropped by the next Next, even when nothing is ready: when the candidate
// is later queued again it is picked as any item is, into the first free
// slot, not handed the victim's.
func TestStaleHandoffDropped(t *testing.T) {
	t.Parallel()
	cfg := scheduler.Config{Slots: 2, MaxWait: [4]time.Duration{scheduler.UrgencyCritical: time.Millisecond}}
	s := newSched(t, cfg, map[string]scheduler.GroupConfig{"a": {Weight: 1}})
	for i, it := range []scheduler.Item{
		{ID: "x", Group: "a", Estimate: est(1000)},
		{ID: "r", Group: "a", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)},
	} {
		must(t, s.Enqueue(it, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != it.ID || d.Slot != i {
			t.Fatalf("setup: %+v %v", d, ok)
		}
	}
	must(t, s.Enqueue(scheduler.Item{ID: "c", Group: "a", Urgency: scheduler.UrgencyCritical, Preemptible: true, Estimate: est(100)}, at(5)))
	if p, ok := s.Preempt(at(10)); !ok || p.Item != "r" || p.Slot != 1 {
		t.Fatalf("preemption %+v %v, want r in slot 1", p, ok)
	}
	must(t, s.Finish("x", at(15)))
	if d, ok := s.Next(at(15)); !ok || d.Item != "c" || d.Slot != 0 {
		t.Fatalf("after x: %+v %v, want c in slot 0", d, ok)
	}
	must(t, s.Finish("r", at(20))) // hands slot 1 to c, which runs already
	if d, ok := s.Next(at(20)); ok {
		t.Fatalf("started %+v with nothing queued", d)
	}
	must(t, s.Release("c", at(30)))
	d, ok := s.Next(at(30))
	if !ok || d.Item != "c" || d.Slot != 0 || d.Basis.PolicyRulesApplied&scheduler.RulePreemptLowestPriority != 0 {
		t.Fatalf("c again: %+v %v, want it picked into slot 0, not handed slot 1", d, ok)
	}
}
