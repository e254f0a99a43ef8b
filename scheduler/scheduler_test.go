package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func newSched(t *testing.T, cfg scheduler.Config, groups map[string]scheduler.GroupConfig) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for id, gc := range groups {
		if err := s.SetGroup(id, gc); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func est(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func TestEligibilityGates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		gates scheduler.Gates
		res   scheduler.Resources
		want  scheduler.Blockers
	}{
		{"eligible", scheduler.Gates{}, scheduler.Resources{}, 0},
		{"dependency pending", scheduler.Gates{DependenciesPending: true}, scheduler.Resources{}, scheduler.BlockedDependencies},
		{"approval required, not granted", scheduler.Gates{ApprovalRequired: true}, scheduler.Resources{}, scheduler.BlockedApproval},
		{"approval granted", scheduler.Gates{ApprovalRequired: true, ApprovalGranted: true}, scheduler.Resources{}, 0},
		{"ownership lost", scheduler.Gates{OwnershipLost: true}, scheduler.Resources{}, scheduler.BlockedOwnership},
		{"fits no slot", scheduler.Gates{}, scheduler.Resources{MemoryMiB: 4096}, scheduler.BlockedResources},
		{"several", scheduler.Gates{DependenciesPending: true, OwnershipLost: true}, scheduler.Resources{},
			scheduler.BlockedDependencies | scheduler.BlockedOwnership},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSched(t, scheduler.Config{Slots: 1, SlotResources: []scheduler.Resources{{MilliCPU: 2000, MemoryMiB: 1024}}},
				map[string]scheduler.GroupConfig{"g": {Weight: 1}})
			must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g", Gates: tc.gates, Resources: tc.res}, at(0)))
			st, _ := s.Status("x")
			if st.Blockers != tc.want {
				t.Fatalf("blockers %s, want %s", st.Blockers, tc.want)
			}
			d, ok := s.Next(at(1))
			if ok != (tc.want == 0) {
				t.Fatalf("Next started=%v with blockers %s", ok, st.Blockers)
			}
			if ok {
				if d.Item != "x" || !d.Basis.AuthorizationEligible {
					t.Fatalf("decision %+v", d)
				}
				return
			}
			// Not picked, not lost: clearing the gates makes it start.
			if st.State != scheduler.StateBlocked {
				t.Fatalf("state %s", st.State)
			}
			clear := scheduler.Gates{ApprovalRequired: tc.gates.ApprovalRequired, ApprovalGranted: true}
			small := time.Duration(0)
			must(t, s.Update("x", scheduler.Change{Gates: &clear, Estimate: &small}, at(2)))
			if tc.want&scheduler.BlockedResources != 0 {
				if _, ok := s.Next(at(3)); ok {
					t.Fatal("an item too big for every slot started")
				}
				must(t, s.Remove("x"))
				return
			}
			if d, ok := s.Next(at(3)); !ok || d.Item != "x" {
				t.Fatalf("after clearing the gates: %+v %v", d, ok)
			}
		})
	}
}

func TestOfflineStartsNothing(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g"}, at(0)))
	s.SetOffline(true)
	if _, ok := s.Next(at(1)); ok {
		t.Fatal("started while offline")
	}
	if d, _ := s.Disclose("x", at(1)); d.CapacityState != scheduler.CapacityOffline || d.Confidence != 0 {
		t.Fatalf("disclosure while offline: %+v", d)
	}
	s.SetOffline(false)
	if d, ok := s.Next(at(2)); !ok || d.Item != "x" {
		t.Fatal("did not start after reconnecting")
	}
}

func TestResourcesBestFit(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 2, SlotResources: []scheduler.Resources{
		{MilliCPU: 4000, MemoryMiB: 8192}, {MilliCPU: 1000, MemoryMiB: 1024},
	}}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "small", Group: "g", Urgency: scheduler.UrgencyHigh, Resources: scheduler.Resources{MilliCPU: 500}}, at(0)))
	must(t, s.Enqueue(scheduler.Item{ID: "big", Group: "g", Resources: scheduler.Resources{MemoryMiB: 4096}}, at(0)))
	got := map[string]int{}
	for range 2 {
		d, ok := s.Next(at(0))
		if !ok {
			t.Fatal("nothing started")
		}
		got[d.Item] = d.Slot
	}
	if !reflect.DeepEqual(got, map[string]int{"small": 1, "big": 0}) {
		t.Fatalf("slots %v: the small item must take the small slot", got)
	}
}

func TestGroupQuota(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 4}, map[string]scheduler.GroupConfig{
		"capped": {Weight: 100, Quota: 1}, "other": {Weight: 1},
	})
	for i := range 3 {
		must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("c%d", i), Group: "capped"}, at(0)))
		must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("o%d", i), Group: "other"}, at(0)))
	}
	perGroup := map[string]int{}
	for {
		d, ok := s.Next(at(0))
		if !ok {
			break
		}
		perGroup[d.Group]++
		if d.Group == "capped" && d.Basis.PolicyRulesApplied&scheduler.RuleGroupQuota == 0 {
			t.Fatal("basis lacks the quota rule")
		}
	}
	if perGroup["capped"] != 1 || perGroup["other"] != 3 {
		t.Fatalf("running per group %v, want capped 1 (its quota), other 3", perGroup)
	}
}

func TestPriorityChangeReordersAtOnce(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	for _, id := range []string{"a", "b", "c"} {
		must(t, s.Enqueue(scheduler.Item{ID: id, Group: "g", Urgency: scheduler.UrgencyLow}, at(0)))
	}
	crit := scheduler.UrgencyCritical
	must(t, s.Update("c", scheduler.Change{Urgency: &crit}, at(1)))
	var order []string
	for i := int64(0); ; i++ {
		d, ok := s.Next(at(10 + i))
		if !ok {
			break
		}
		order = append(order, d.Item)
		must(t, s.Finish(d.Item, at(11+i)))
	}
	if !reflect.DeepEqual(order, []string{"c", "a", "b"}) {
		t.Fatalf("order %v, want c first then arrival order", order)
	}
}

// An idle Group rejoins at the current virtual time: a Group that slept while
// another worked gets its fair turn, not a burst of all the time it missed.
func TestIdleRejoinNoBankedBurst(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"busy": {Weight: 1}, "sleeper": {Weight: 1}})
	now := int64(0)
	run := func() string {
		d, ok := s.Next(at(now))
		if !ok {
			t.Fatal("nothing to start")
		}
		now += 100
		must(t, s.Finish(d.Item, at(now)))
		return d.Group
	}
	for i := range 200 {
		must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("b%d", i), Group: "busy", Estimate: est(100)}, at(0)))
	}
	for range 100 {
		run() // "busy" alone for 10 s of slot-time
	}
	for i := range 50 {
		must(t, s.Enqueue(scheduler.Item{ID: fmt.Sprintf("s%d", i), Group: "sleeper", Estimate: est(100)}, at(now)))
	}
	counts := map[string]int{}
	for range 20 {
		counts[run()]++
	}
	if counts["busy"] < 9 || counts["sleeper"] < 9 {
		t.Fatalf("after rejoining, 20 picks went %v; want them shared about equally", counts)
	}
}

func TestPreemptionVictim(t *testing.T) {
	t.Parallel()
	type run struct {
		id, group   string
		urgency     scheduler.Urgency
		preemptible bool
	}
	for _, tc := range []struct {
		name    string
		groups  map[string]scheduler.GroupConfig
		running []run
		waiting run
		want    string // victim; "" for none
	}{
		{
			name:   "lowest priority preemptible item of the own group",
			groups: map[string]scheduler.GroupConfig{"g": {Weight: 1}},
			running: []run{{"n1", "g", scheduler.UrgencyNormal, true}, {"l1", "g", scheduler.UrgencyLow, true},
				{"h1", "g", scheduler.UrgencyHigh, true}},
			waiting: run{"c", "g", scheduler.UrgencyCritical, true},
			want:    "l1",
		},
		{
			name:    "non-preemptible items are never victims",
			groups:  map[string]scheduler.GroupConfig{"g": {Weight: 1}},
			running: []run{{"l1", "g", scheduler.UrgencyLow, false}, {"n1", "g", scheduler.UrgencyNormal, true}},
			waiting: run{"c", "g", scheduler.UrgencyCritical, true},
			want:    "n1",
		},
		{
			name:    "nothing ranks below the candidate",
			groups:  map[string]scheduler.GroupConfig{"g": {Weight: 1}},
			running: []run{{"c1", "g", scheduler.UrgencyCritical, true}},
			waiting: run{"c", "g", scheduler.UrgencyCritical, true},
		},
		{
			name:    "another group above its fair share yields",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}},
			running: []run{{"b1", "b", scheduler.UrgencyLow, true}, {"b2", "b", scheduler.UrgencyNormal, true}},
			waiting: run{"c", "a", scheduler.UrgencyCritical, true},
			want:    "b1",
		},
		{
			name:    "a group at its fair share is not pushed below it",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 1}},
			running: []run{{"a1", "a", scheduler.UrgencyNormal, true}, {"b1", "b", scheduler.UrgencyLow, true}},
			waiting: run{"c", "a", scheduler.UrgencyCritical, true},
			want:    "a1", // own group's lower item instead
		},
		{
			name:    "a group at or above its fair share takes nothing from others",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 3}},
			running: []run{{"a1", "a", scheduler.UrgencyCritical, true}, {"b1", "b", scheduler.UrgencyLow, true}},
			waiting: run{"c", "a", scheduler.UrgencyCritical, true},
		},
		{
			name:    "a group below its fair share takes from one above it",
			groups:  map[string]scheduler.GroupConfig{"a": {Weight: 1}, "b": {Weight: 3}},
			running: []run{{"b1", "b", scheduler.UrgencyLow, true}},
			waiting: run{"c", "a", scheduler.UrgencyCritical, true},
			want:    "b1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSched(t, scheduler.Config{Slots: len(tc.running)}, tc.groups)
			for _, r := range tc.running {
				must(t, s.Enqueue(scheduler.Item{ID: r.id, Group: r.group, Urgency: r.urgency, Preemptible: r.preemptible, Estimate: est(1000)}, at(0)))
				d, ok := s.Next(at(0))
				if !ok || d.Item != r.id {
					t.Fatalf("setup: %v %v", d, ok)
				}
			}
			w := tc.waiting
			must(t, s.Enqueue(scheduler.Item{ID: w.id, Group: w.group, Urgency: w.urgency, Preemptible: w.preemptible, Estimate: est(1000)}, at(10)))
			if _, ok := s.Next(at(10)); ok {
				t.Fatal("started with every slot busy")
			}
			p, ok := s.Preempt(at(10))
			if tc.want == "" {
				if ok {
					t.Fatalf("unexpected preemption %+v", p)
				}
				return
			}
			if !ok || p.Item != tc.want || p.For != w.id {
				t.Fatalf("preemption %+v %v, want victim %s", p, ok, tc.want)
			}
			if st, _ := s.Status(p.Item); st.State != scheduler.StatePreempting {
				t.Fatalf("victim state %s", st.State)
			}
			if _, again := s.Preempt(at(11)); again {
				t.Fatal("second preemption while one is in flight")
			}
			// Cooperative: the slot stays busy until the checkpoint, then
			// goes to the item that asked for it.
			if _, ok := s.Next(at(12)); ok {
				t.Fatal("slot given away before the victim released it")
			}
			must(t, s.Release(p.Item, at(20)))
			d, ok := s.Next(at(20))
			if !ok || d.Item != w.id || d.Slot != p.Slot {
				t.Fatalf("after release: %+v %v, want %s in slot %d", d, ok, w.id, p.Slot)
			}
			if st, _ := s.Status(p.Item); st.State != scheduler.StateQueued {
				t.Fatalf("victim not back in its queue: %s", st.State)
			}
		})
	}
}

func TestSelectionBasisShape(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1, Quota: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g", Urgency: scheduler.UrgencyHigh, Estimate: est(250),
		Capabilities: []string{"code.implement@1.x"}, Evidence: []string{"sha256:ab"},
		Gates: scheduler.Gates{ApprovalRequired: true, ApprovalGranted: true}}, at(0)))
	d, ok := s.Next(at(5))
	if !ok {
		t.Fatal("nothing started")
	}
	b, err := json.Marshal(d.Basis)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capabilityMatches":["code.implement@1.x"],"authorizationEligible":true,` +
		`"availabilityEstimate":"2026-11-30T08:00:00.005Z","expectedCost":250,"reliabilityEvidence":["sha256:ab"],` +
		`"policyRulesApplied":["scheduler.fair-share.virtual-time","scheduler.group-quota","scheduler.urgency-order","scheduler.risk-gate.approval"]}`
	if string(b) != want {
		t.Fatalf("basis\n got %s\nwant %s", b, want)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g"}, at(0)))
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"unknown group", s.Enqueue(scheduler.Item{ID: "y", Group: "nope"}, at(0)), scheduler.ErrUnknownGroup},
		{"duplicate", s.Enqueue(scheduler.Item{ID: "x", Group: "g"}, at(0)), scheduler.ErrDuplicate},
		{"finish queued", s.Finish("x", at(1)), scheduler.ErrWrongState},
		{"release unknown", s.Release("zz", at(1)), scheduler.ErrUnknownItem},
		{"zero weight", s.SetGroup("h", scheduler.GroupConfig{}), scheduler.ErrInvalid},
		{"bad urgency", s.Enqueue(scheduler.Item{ID: "u", Group: "g", Urgency: 9}, at(0)), scheduler.ErrInvalid},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := scheduler.New(scheduler.Config{}); !errors.Is(err, scheduler.ErrInvalid) {
		t.Errorf("zero slots: %v", err)
	}
}

// A victim that does not reach a safe point keeps its slot (11.3): the
// refusal puts it back to running, it is not named again during this run,
// the next victim may be named, and the candidate takes the next slot that
// frees.
func TestPreemptionRefused(t *testing.T) {
	t.Parallel()
	s := newSched(t, scheduler.Config{Slots: 2}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
	for _, r := range []struct {
		id string
		u  scheduler.Urgency
	}{{"l1", scheduler.UrgencyLow}, {"n1", scheduler.UrgencyNormal}} {
		must(t, s.Enqueue(scheduler.Item{ID: r.id, Group: "g", Urgency: r.u, Preemptible: true, Estimate: est(1000)}, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != r.id {
			t.Fatalf("setup: %v %v", d, ok)
		}
	}
	must(t, s.Enqueue(scheduler.Item{ID: "c", Group: "g", Urgency: scheduler.UrgencyCritical, Preemptible: true, Estimate: est(1000)}, at(10)))
	p, ok := s.Preempt(at(10))
	if !ok || p.Item != "l1" {
		t.Fatalf("preemption %+v %v, want l1", p, ok)
	}
	if err := s.RefusePreempt("n1"); !errors.Is(err, scheduler.ErrWrongState) {
		t.Fatalf("refusing a run never asked: %v", err)
	}
	must(t, s.RefusePreempt("l1"))
	if st, _ := s.Status("l1"); st.State != scheduler.StateRunning || !st.PreemptRefused {
		t.Fatalf("refused victim: %+v", st)
	}
	if s.Refusals() != 1 {
		t.Fatalf("refusals %d", s.Refusals())
	}
	// The next preemption names the other running item, never l1 again.
	p, ok = s.Preempt(at(11))
	if !ok || p.Item != "n1" {
		t.Fatalf("second preemption %+v %v, want n1", p, ok)
	}
	must(t, s.RefusePreempt("n1"))
	if p, ok := s.Preempt(at(12)); ok {
		t.Fatalf("a refused run named again: %+v", p)
	}
	// The candidate waits for a slot and takes the first one that frees.
	if _, ok := s.Next(at(13)); ok {
		t.Fatal("started with every slot busy")
	}
	must(t, s.Finish("n1", at(20)))
	if d, ok := s.Next(at(20)); !ok || d.Item != "c" {
		t.Fatalf("after a slot freed: %+v %v, want c", d, ok)
	}
	if err := s.RefusePreempt("gone"); !errors.Is(err, scheduler.ErrUnknownItem) {
		t.Fatalf("unknown item: %v", err)
	}
}

// A clock stepped back while an item ran: it still ends, Finish or
// Release, and its slot is free for the next item.
func TestStopAfterClockSteppedBack(t *testing.T) {
	t.Parallel()
	for _, release := range []bool{false, true} {
		s := newSched(t, scheduler.Config{Slots: 1}, map[string]scheduler.GroupConfig{"g": {Weight: 1}})
		must(t, s.Enqueue(scheduler.Item{ID: "x", Group: "g"}, at(0)))
		must(t, s.Enqueue(scheduler.Item{ID: "y", Group: "g"}, at(0)))
		if d, ok := s.Next(at(60_000)); !ok || d.Item != "x" {
			t.Fatalf("first pick %+v %v", d, ok)
		}
		stop := s.Finish
		if release {
			stop = s.Release
		}
		must(t, stop("x", at(1_000))) // a minute back
		if d, ok := s.Next(at(1_000)); !ok {
			t.Fatalf("release=%v: nothing started in the freed slot", release)
		} else if d.Item != "y" && d.Item != "x" {
			t.Fatalf("release=%v: started %q", release, d.Item)
		}
	}
}
