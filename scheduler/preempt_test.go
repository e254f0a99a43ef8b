package scheduler_test

import (
	"fmt"
	"slices"
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
		fixed   []string // running items that are not preemptible
		queued  []string // Groups with a low item waiting (active, not running)
		from    string   // the candidate's Group
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
		// Weights 1:2:1 on four slots: b holds its whole-slot share (2) and
		// keeps it although its items rank lowest; c is above its share (1).
		{name: "across Groups: a Group at its whole-slot share keeps it",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 2}, "c": {Weight: 1}},
			running: []run{{"b1", "b", scheduler.UrgencyLow, 0}, {"b2", "b", scheduler.UrgencyLow, 10}, {"c1", "c", scheduler.UrgencyNormal, 0}, {"c2", "c", scheduler.UrgencyNormal, 10}},
			from:    "a", ask: 200, want: "c2", across: true},
		// The same Groups, b started last: a joins at the virtual time c had
		// when its second item started, behind b's (b's two runs put it at
		// 100 025 against a's 100 010), so only b's share keeps b's items,
		// the lowest ranked, from being taken.
		{name: "across Groups: a Group at its whole-slot share keeps it from a Group behind it",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 2}, "c": {Weight: 1}},
			running: []run{{"c1", "c", scheduler.UrgencyNormal, 0}, {"c2", "c", scheduler.UrgencyNormal, 10}, {"b1", "b", scheduler.UrgencyLow, 20}, {"b2", "b", scheduler.UrgencyLow, 30}},
			from:    "a", ask: 200, want: "c2", across: true},
		// Three Groups of weight 1 on three slots, b waiting: a holds exactly
		// its share (one slot), so it takes none from c, which holds two.
		{name: "across Groups: a candidate's Group at its share preempts no other",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}, "c": {Weight: 1}},
			running: []run{{"a1", "a", scheduler.UrgencyNormal, 0}, {"c1", "c", scheduler.UrgencyNormal, 0}, {"c2", "c", scheduler.UrgencyNormal, 10}},
			fixed:   []string{"a1"}, queued: []string{"b"}, from: "a", ask: 200},
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
				must(t, s.Enqueue(scheduler.Item{ID: r.id, Group: r.group, Urgency: r.urgency, Preemptible: !slices.Contains(tc.fixed, r.id), Estimate: est(100_000)}, at(0)))
				must(t, s.Finish("blocker", at(r.start)))
				if d, ok := s.Next(at(r.start)); !ok || d.Item != r.id {
					t.Fatalf("setup: %+v %v, want %s started at %d", d, ok, r.id, r.start)
				}
			}
			for _, g := range tc.queued {
				must(t, s.Enqueue(scheduler.Item{ID: "waiting-" + g, Group: g, Urgency: scheduler.UrgencyLow, Estimate: est(100)}, at(tc.ask-1)))
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

// EDFBurst bounds how many deadline picks in a row pass over an overdue
// item: the default is 4, a negative value none. The item is overdue from
// its aging key (1 ms after it was queued) on, that instant included.
func TestEDFBurst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		burst int
		start int64 // the first pick
		want  int   // deadline items started before the overdue one
	}{{0, 10, 4}, {2, 10, 2}, {-1, 10, 0}, {-1, 1, 0}, {2, 1, 2}} {
		s := newSched(t, scheduler.Config{Slots: 1, SlackWindow: time.Hour, EDFBurst: tc.burst,
			MaxWait: [4]time.Duration{scheduler.UrgencyLow: time.Millisecond}}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
		must(t, s.Enqueue(scheduler.Item{ID: "old", Group: "g", Urgency: scheduler.UrgencyLow, Estimate: est(1)}, at(0)))
		for i := range 6 {
			must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("d%d", i), Group: "g", Urgency: scheduler.UrgencyNormal, Estimate: est(1), Deadline: at(int64(10_000 + i))}, at(0)))
		}
		got := -1
		for n, now := 0, tc.start; n < 7; n, now = n+1, now+2 {
			d, ok := s.Next(at(now))
			if !ok {
				t.Fatalf("burst %d: nothing started at %d", tc.burst, now)
			}
			if d.Item == "old" {
				got = n
				break
			}
			must(t, s.Finish(d.Item, at(now+1)))
		}
		if got != tc.want {
			t.Errorf("EDFBurst %d from %d: the overdue item started after %d deadline items, want %d", tc.burst, tc.start, got, tc.want)
		}
	}
}

// With a free slot the pressing item fits, Preempt names no victim (Next
// starts it); a Group at its quota cannot use the free slot, so its own
// lower item yields.
func TestPreemptWithFreeSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		quota int
		want  string
	}{
		{"a free slot", 0, ""},
		{"a free slot, but the Group is at its quota", 1, "b"},
	} {
		s := newSched(t, scheduler.Config{Slots: 2}, map[string]scheduler.GroupConfig{"g": {Weight: 1, Quota: tc.quota}, "h": {Weight: 1}})
		// a takes slot 0 and b slot 1; a finishes: slot 0 is free.
		for i, it := range []scheduler.Item{{ID: "a", Group: "h", Preemptible: true, Estimate: est(1000)},
			{ID: "b", Group: "g", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)}} {
			must(t, s.Enqueue(it, at(0)))
			if d, ok := s.Next(at(0)); !ok || d.Item != it.ID || d.Slot != i {
				t.Fatalf("setup: %+v %v, want %s in slot %d", d, ok, it.ID, i)
			}
		}
		must(t, s.Finish("a", at(10)))
		must(t, s.Enqueue(scheduler.Item{ID: "c", Group: "g", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(10)))
		p, ok := s.Preempt(at(20))
		if got := map[bool]string{true: p.Item}[ok]; got != tc.want {
			t.Errorf("%s: victim %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A deadline item asks for a slot only when its latest start comes before
// the next running item's estimated end.
func TestPreemptOnlyWhenTheDeadlineCannotWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deadline int64 // estimate 100: latest start deadline-100; r ends at 1000
		want     string
	}{{1100, ""}, {1099, "r"}} {
		s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
		must(t, s.Enqueue(scheduler.Item{ID: "r", Group: "g", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)}, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != "r" {
			t.Fatalf("setup: %+v %v", d, ok)
		}
		must(t, s.Enqueue(scheduler.Item{ID: "d", Group: "g", Estimate: est(100), Deadline: at(tc.deadline)}, at(5)))
		p, ok := s.Preempt(at(10))
		if got := map[bool]string{true: p.Item}[ok]; got != tc.want {
			t.Errorf("deadline %d: victim %q, want %q", tc.deadline, got, tc.want)
		}
	}
}

// Between the pressing items of two Groups at the same virtual time, the
// Group with the smaller id asks first.
func TestPreemptCandidateTie(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}, "z": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "r", Group: "z", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(1000)}, at(0)))
	if d, ok := s.Next(at(0)); !ok || d.Item != "r" {
		t.Fatalf("setup: %+v %v", d, ok)
	}
	must(t, s.Enqueue(scheduler.Item{ID: "cb", Group: "b", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(5)))
	must(t, s.Enqueue(scheduler.Item{ID: "ca", Group: "a", Urgency: scheduler.UrgencyCritical, Estimate: est(100)}, at(5)))
	p, ok := s.Preempt(at(10))
	if !ok || p.Item != "r" || p.For != "ca" {
		t.Fatalf("preemption %+v %v, want r for ca", p, ok)
	}
}
