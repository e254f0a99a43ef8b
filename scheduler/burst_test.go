package scheduler_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/scheduler/simulate"
)

// burst is three long low runs of Group batch on three slots, then three
// critical items arriving together at 1 s; a preempted run reaches its
// safe point checkpointMs (5 s) after the request. groups says whose the
// critical items are: batch's own, or one new Group each.
func burst(ownGroup bool, critMs int64) *simulate.Input {
	in := &simulate.Input{Slots: 3, CheckpointMs: 5000, Groups: []simulate.GroupSpec{{ID: "batch", Weight: 1}}}
	for i := 1; i <= 3; i++ {
		in.Items = append(in.Items, item(fmt.Sprintf("long%d", i), "batch", "low", 0, 60_000))
	}
	for i := 1; i <= 3; i++ {
		g := "batch"
		if !ownGroup {
			g = fmt.Sprintf("ops%d", i)
			in.Groups = append(in.Groups, simulate.GroupSpec{ID: g, Weight: 1})
		}
		in.Items = append(in.Items, item(fmt.Sprintf("crit%d", i), g, "critical", 1000, critMs))
	}
	return in
}

// A burst of three critical items has its three preemptions in flight
// together: each item starts when its victim reaches its safe point, 5 s
// after the request, not one after another (5, 9 and 13 s when one
// preemption was in flight at a time).
func TestPreemptionBurstServedTogether(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ownGroup bool
	}{{"critical items of the runs' own Group", true}, {"critical items of three other Groups", false}} {
		r, err := simulate.Run(burst(tc.ownGroup, 4000))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range r.Items[3:] {
			if wait := it.FirstStartMs - it.ArrivalMs; wait > 5000 {
				t.Errorf("%s: %s waited %d ms, want its victim's safe point, 5000", tc.name, it.ID, wait)
			}
		}
		if r.Summary.Preemptions != 3 {
			t.Errorf("%s: %d preemptions, want 3", tc.name, r.Summary.Preemptions)
		}
		// Each preemption names the critical item it is for, a different
		// one each, and that item starts in the victim's slot.
		forItem := map[string]simulate.Event{}
		for _, e := range r.Events {
			if e.Action == "preempt" {
				if _, dup := forItem[e.For]; dup || e.For == "" {
					t.Errorf("%s: preemption %+v: for no item or one already named", tc.name, e)
				}
				forItem[e.For] = e
			}
		}
		for _, e := range r.Events {
			if p, ok := forItem[e.Item]; ok && e.Action == "start" && e.Slot != p.Slot {
				t.Errorf("%s: %s started in slot %d, its preemption freed slot %d", tc.name, e.Item, e.Slot, p.Slot)
			}
		}
		for _, it := range r.Items[3:] {
			if _, ok := forItem[it.ID]; !ok {
				t.Errorf("%s: no preemption names %s", tc.name, it.ID)
			}
		}
	}
}

// Preemptions in flight count as done for fairness: with the three
// critical items in one Group of batch's weight, two of batch's three
// slots are asked for at once, and batch keeps its whole-slot share.
func TestPreemptionBurstKeepsFairShare(t *testing.T) {
	t.Parallel()
	in := burst(false, 4000)
	in.Groups = []simulate.GroupSpec{{ID: "batch", Weight: 1}, {ID: "ops", Weight: 1}}
	for i := 3; i < 6; i++ {
		in.Items[i].Group = "ops"
	}
	r, err := simulate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, e := range r.Events {
		if e.Action == "preempt" && e.AtMs == 1000 {
			asked++
		}
	}
	if asked != 2 {
		t.Fatalf("%d preemptions asked at once, want 2 (events %+v)", asked, r.Events)
	}
}

// The committed example is that burst (docs/performance.md quotes it).
func TestPreemptionBurstExample(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../examples/scheduler/preemption-burst.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := simulate.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := simulate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range r.Items {
		if wait := it.FirstStartMs - it.ArrivalMs; it.ArrivalMs > 0 && wait != in.CheckpointMs {
			t.Errorf("%s waited %d ms, want %d", it.ID, wait, in.CheckpointMs)
		}
	}
}

// burstWorld: on two slots run long (preemptible) and x (not), both of
// Group batch (weight 1); the critical items c1 and c2 of Group ops (weight
// 3) arrive at 10. ops is below its share and behind batch in virtual
// time, so long may yield to it; x cannot.
func burstWorld(t *testing.T) *scheduler.Scheduler {
	t.Helper()
	cfg := scheduler.Config{Slots: 2, MaxWait: [4]time.Duration{scheduler.UrgencyCritical: time.Millisecond}}
	s := newSched(t, cfg, map[string]scheduler.GroupConfig{"batch": {Weight: 1}, "ops": {Weight: 3}})
	for i, it := range []scheduler.Item{
		{ID: "long", Group: "batch", Urgency: scheduler.UrgencyLow, Preemptible: true, Estimate: est(10_000)},
		{ID: "x", Group: "batch", Urgency: scheduler.UrgencyLow, Estimate: est(100)},
	} {
		must(t, s.Enqueue(it, at(0)))
		if d, ok := s.Next(at(0)); !ok || d.Item != it.ID || d.Slot != i {
			t.Fatalf("setup: %+v %v, want %s in slot %d", d, ok, it.ID, i)
		}
	}
	for _, id := range []string{"c1", "c2"} {
		must(t, s.Enqueue(scheduler.Item{ID: id, Group: "ops", Urgency: scheduler.UrgencyCritical, Estimate: est(50)}, at(10)))
	}
	return s
}

// A preempted item does not retake the slot it freed while a more urgent
// item waits. long is asked to yield for c1; x's slot frees first and c1
// takes it, so long's preemption is for no one: it is withdrawn, and named
// again for c2, which then gets long's slot. (With the preemption left for
// c1, long's slot went back to the common pick: long itself, batch being
// behind once long's charge is its actual 5.1 s, while c2 waited.)
func TestPreemptedItemDoesNotRetakeItsSlot(t *testing.T) {
	t.Parallel()
	s := burstWorld(t)
	if p, ok := s.Preempt(at(20)); !ok || p.Item != "long" || p.For != "c1" {
		t.Fatalf("preemption %+v %v, want long for c1", p, ok)
	}
	if p, ok := s.Preempt(at(20)); ok {
		t.Fatalf("second preemption %+v: x is not preemptible, none is left", p)
	}
	must(t, s.Finish("x", at(100)))
	if d, ok := s.Next(at(100)); !ok || d.Item != "c1" || d.Slot != 1 {
		t.Fatalf("after x: %+v %v, want c1 in x's slot", d, ok)
	}
	if st, _ := s.Status("long"); st.State != scheduler.StateRunning {
		t.Fatalf("long is %s: its preemption, for c1 that started, is still in flight", st.State)
	}
	if p, ok := s.Preempt(at(100)); !ok || p.Item != "long" || p.For != "c2" {
		t.Fatalf("preemption %+v %v, want long for c2", p, ok)
	}
	must(t, s.Release("long", at(5100)))
	d, ok := s.Next(at(5100))
	if !ok || d.Item != "c2" || d.Slot != 0 {
		t.Fatalf("after long's safe point: %+v %v, want c2 in long's slot", d, ok)
	}
	if st, _ := s.Status("long"); st.State != scheduler.StateQueued {
		t.Fatalf("long is %s, want queued behind c2", st.State)
	}
}

// No run is preempted needlessly: a slot that frees serves the waiting
// critical item instead of going to the common pick and costing another
// run a preemption.
func TestNoNeedlessPreemption(t *testing.T) {
	t.Parallel()
	t.Run("a slot freed while the item's preemption is in flight", func(t *testing.T) {
		t.Parallel()
		s := burstWorld(t)
		must(t, s.Remove("c2"))
		if p, ok := s.Preempt(at(20)); !ok || p.Item != "long" {
			t.Fatalf("preemption %+v %v, want long for c1", p, ok)
		}
		must(t, s.Finish("x", at(100)))
		if d, ok := s.Next(at(100)); !ok || d.Item != "c1" {
			t.Fatalf("after x: %+v %v, want c1", d, ok)
		}
		if st, _ := s.Status("long"); st.State != scheduler.StateRunning {
			t.Fatalf("long is %s, want running: nothing waits for its slot", st.State)
		}
		if p, ok := s.Preempt(at(100)); ok {
			t.Fatalf("preemption %+v with nothing waiting", p)
		}
	})
	// Two Groups: ops's critical items take two of batch's three slots
	// (the fair-share floor keeps batch's one). When both finish, the
	// common pick would give both freed slots to batch's preempted runs
	// and then preempt batch's third for crit3; crit3 takes one of them
	// instead, and no third run is preempted.
	t.Run("a slot freed at the instant an item would preempt", func(t *testing.T) {
		t.Parallel()
		in := burst(false, 10_000)
		in.Groups = []simulate.GroupSpec{{ID: "batch", Weight: 1}, {ID: "ops", Weight: 1}}
		for i := 3; i < 6; i++ {
			in.Items[i].Group = "ops"
		}
		r, err := simulate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Summary.Preemptions != 2 {
			t.Errorf("%d preemptions, want 2 (the events: %+v)", r.Summary.Preemptions, r.Events)
		}
		if it := r.Items[5]; it.FirstStartMs != 16_000 {
			t.Errorf("crit3 started at %d, want 16000 when the first two finish", it.FirstStartMs)
		}
	})
}
