package scheduler_test

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// The boundaries of victim choice, one world per row: items start in
// order at the given times (a slot freed by a blocker that finishes then),
// then a critical item arrives and Preempt is asked at `ask`, when the
// critical item is overdue (its aging bound is 1 ms), so it outranks a
// running item that is past its own bound too.
func TestPreemptionBoundaries(t *testing.T) {
	t.Parallel()
	type run struct {
		id, group string
		urgency   scheduler.Urgency
		start     int64
	}
	cfg := scheduler.Config{MinRun: 100 * time.Millisecond, MaxWait: [4]time.Duration{scheduler.UrgencyLow: 500 * time.Millisecond, scheduler.UrgencyCritical: time.Millisecond}}
	one := map[string]scheduler.GroupConfig{"g": {Weight: 1}}
	for _, tc := range []struct {
		name    string
		groups  map[string]scheduler.GroupConfig
		running []run
		from    string // the candidate's Group
		ask     int64
		want    string // victim; "" for none
		across  bool   // the victim is of another Group: the fair-share floor rule applies
	}{
		{name: "younger than MinRun", groups: one, running: []run{{"l", "g", scheduler.UrgencyNormal, 1000}}, from: "g", ask: 1099},
		{name: "exactly MinRun old", groups: one, running: []run{{"l", "g", scheduler.UrgencyNormal, 1000}}, from: "g", ask: 1100, want: "l"},
		// A low item's aging bound is 500 ms after it was queued (at 0).
		{name: "started at its aging bound: starved once, runs to its end", groups: one, running: []run{{"l", "g", scheduler.UrgencyLow, 500}}, from: "g", ask: 700},
		{name: "started just before its aging bound", groups: one, running: []run{{"l", "g", scheduler.UrgencyLow, 499}}, from: "g", ask: 700, want: "l"},
		{name: "equal rank: the latest started", groups: one, running: []run{{"a", "g", scheduler.UrgencyNormal, 0}, {"b", "g", scheduler.UrgencyNormal, 10}}, from: "g", ask: 200, want: "b"},
		{name: "equal rank: the latest started, in the first slot", groups: one, running: []run{{"a", "g", scheduler.UrgencyNormal, 10}, {"b", "g", scheduler.UrgencyNormal, 0}}, from: "g", ask: 200, want: "a"},
		{name: "equal rank and start: the first slot", groups: one, running: []run{{"a", "g", scheduler.UrgencyNormal, 0}, {"b", "g", scheduler.UrgencyNormal, 0}}, from: "g", ask: 200, want: "a"},
		{name: "lower rank beats a later start", groups: one, running: []run{{"a", "g", scheduler.UrgencyLow, 0}, {"b", "g", scheduler.UrgencyNormal, 10}}, from: "g", ask: 200, want: "a"},
		// Three Groups of weight 1 on three slots; a holds none. The victim
		// is c's (above its share), the later started of its two.
		{name: "across Groups: from the Group above its share, the latest started",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}, "c": {Weight: 1}},
			running: []run{{"b1", "b", scheduler.UrgencyLow, 0}, {"c1", "c", scheduler.UrgencyNormal, 0}, {"c2", "c", scheduler.UrgencyNormal, 10}},
			from:    "a", ask: 200, want: "c2", across: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.Slots = len(tc.running)
			s := newSched(t, c, tc.groups)
			// A blocker holds the last slot until each item's start.
			for i, r := range tc.running {
				must(t, s.Enqueue(scheduler.Item{ID: "blocker", Group: r.group, Urgency: scheduler.UrgencyCritical, Estimate: est(1)}, at(0)))
				if d, ok := s.Next(at(0)); !ok || d.Item != "blocker" {
					t.Fatalf("setup %d: %+v %v", i, d, ok)
				}
				must(t, s.Enqueue(scheduler.Item{ID: r.id, Group: r.group, Urgency: r.urgency, Preemptible: true, Estimate: est(100_000)}, at(0)))
				must(t, s.Finish("blocker", at(r.start)))
				if d, ok := s.Next(at(r.start)); !ok || d.Item != r.id {
					t.Fatalf("setup: %+v %v, want %s started at %d", d, ok, r.id, r.start)
				}
			}
			must(t, s.Enqueue(scheduler.Item{ID: "c", Group: tc.from, Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(tc.ask-1)))
			p, ok := s.Preempt(at(tc.ask))
			if got := map[bool]string{true: p.Item}[ok]; got != tc.want {
				t.Fatalf("victim %q, want %q (%+v)", got, tc.want, p)
			}
			if ok && (p.Basis.PolicyRulesApplied&scheduler.RulePreemptFairShareFloor != 0) != tc.across {
				t.Fatalf("rules %v, want the fair-share floor %v", p.Basis.PolicyRulesApplied.Names(), tc.across)
			}
		})
	}
}
