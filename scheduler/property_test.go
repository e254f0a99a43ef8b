package scheduler_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/scheduler/simulate"
	"pgregory.net/rapid"
)

var urgencies = []string{"low", "normal", "high", "critical"}

// genWorkload draws Groups with weights and optional quotas, and items with
// random urgency, arrival and duration.
func genWorkload(t *rapid.T, quotas, deadlines bool) *simulate.Input {
	in := &simulate.Input{
		Slots:        rapid.IntRange(1, 6).Draw(t, "slots"),
		CheckpointMs: rapid.Int64Range(0, 20).Draw(t, "checkpointMs"),
	}
	ng := rapid.IntRange(1, 5).Draw(t, "groups")
	for g := range ng {
		gs := simulate.GroupSpec{ID: fmt.Sprintf("g%d", g), Weight: rapid.Int64Range(1, 10).Draw(t, "weight")}
		if quotas && rapid.Bool().Draw(t, "hasQuota") {
			q := rapid.IntRange(1, in.Slots).Draw(t, "quota")
			gs.Quota = &q
		}
		in.Groups = append(in.Groups, gs)
	}
	n := rapid.IntRange(1, 120).Draw(t, "items")
	for i := range n {
		it := item(fmt.Sprintf("i%d", i), fmt.Sprintf("g%d", rapid.IntRange(0, ng-1).Draw(t, "group")),
			rapid.SampledFrom(urgencies).Draw(t, "urgency"),
			rapid.Int64Range(0, 3000).Draw(t, "arrival"), rapid.Int64Range(1, 200).Draw(t, "duration"))
		if deadlines && rapid.Bool().Draw(t, "hasDeadline") {
			it.DeadlineMs = i64(*it.ArrivalMs + rapid.Int64Range(0, 3000).Draw(t, "slack"))
		}
		in.Items = append(in.Items, it)
	}
	return in
}

// (e) Starvation bound of doc.go over random workloads: every item starts
// within MaxWait(u) + R((A+1)(B+1)), A being its Group's items still ahead
// of it (smaller aging key, arrived, unfinished) when it becomes overdue.
func TestPropertyStarvationBound(t *testing.T) {
	t.Parallel()
	const burst = 4 // Config.EDFBurst default
	rapid.Check(t, func(t *rapid.T) {
		in := genWorkload(t, true, true)
		r, err := simulate.RunWith(in, simulate.Options{Config: fastAging})
		if err != nil {
			t.Fatal(err)
		}
		type key struct{ ta, seq int64 }
		keys := make([]key, len(in.Items))
		// Arrival order is the scheduler's seq (stable by input order).
		order := make([]int, len(in.Items))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return *in.Items[order[a]].ArrivalMs < *in.Items[order[b]].ArrivalMs })
		for seq, i := range order {
			u, _ := scheduler.ParseUrgency(in.Items[i].Urgency)
			keys[i] = key{*in.Items[i].ArrivalMs + maxWaitMs(fastAging, u), int64(seq)}
		}
		dStar := maxDuration(in)
		for x, res := range r.Items {
			ta := keys[x].ta
			var ahead int64
			for y, other := range r.Items {
				if y == x || other.Group != res.Group {
					continue
				}
				k := keys[y]
				if (k.ta < ta || (k.ta == ta && k.seq < keys[x].seq)) && other.ArrivalMs <= ta && other.FinishMs > ta {
					ahead++
				}
			}
			m := ta - res.ArrivalMs
			bound := float64(m) + boundR(in, res.Group, (ahead+1)*(burst+1), dStar)
			if wait := res.FirstStartMs - res.ArrivalMs; float64(wait) > bound {
				t.Fatalf("item %s (%s) waited %d ms > bound %.0f (ahead %d)", res.ID, res.Group, wait, bound, ahead)
			}
		}
	})
}

// (e) Fairness over random backlogged workloads: while every Group still has
// queued work, each Group's slot-time stays within a lag of (2S+G)·D* of its
// weighted share of the slot-time used.
func TestPropertyFairShare(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		in := genWorkload(t, false, false)
		perGroup := map[string]int{}
		for i := range in.Items {
			*in.Items[i].ArrivalMs = 0
			perGroup[in.Items[i].Group]++
		}
		r, err := simulate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		// The cut: the first start of a Group's last item; before it every
		// Group with items was backlogged.
		cut := int64(-1)
		started := map[string]int{}
		for _, e := range r.Events {
			if e.Action != "start" {
				continue
			}
			started[e.Group]++
			if started[e.Group] == perGroup[e.Group] {
				cut = e.AtMs
				break
			}
		}
		var W int64
		for _, g := range in.Groups {
			if perGroup[g.ID] > 0 {
				W += g.Weight
			}
		}
		used := slotTimeUntil(r, cut)
		var total int64
		for _, v := range used {
			total += v
		}
		lag := float64(2*in.Slots+len(in.Groups)) * float64(maxDuration(in))
		for _, g := range in.Groups {
			if perGroup[g.ID] == 0 {
				continue
			}
			want := float64(total) * float64(g.Weight) / float64(W)
			if d := float64(used[g.ID]) - want; d > lag || d < -lag {
				t.Fatalf("group %s: slot-time %d, weighted share %.0f, lag %.0f > %.0f", g.ID, used[g.ID], want, d, lag)
			}
		}
	})
}

// (c) Under a feasible load no item misses a deadline that earliest deadline
// first meets: whenever a naive non-preemptive EDF meets every deadline of a
// single Group's workload, so does the scheduler (urgencies mixed in).
func TestPropertyEDFFeasible(t *testing.T) {
	t.Parallel()
	feasible := 0
	rapid.Check(t, func(t *rapid.T) {
		in := &simulate.Input{Slots: rapid.IntRange(1, 3).Draw(t, "slots"), Groups: []simulate.GroupSpec{{ID: "g", Weight: 1}}}
		n := rapid.IntRange(1, 25).Draw(t, "items")
		for i := range n {
			it := item(fmt.Sprintf("i%d", i), "g", rapid.SampledFrom(urgencies).Draw(t, "urgency"),
				rapid.Int64Range(0, 1000).Draw(t, "arrival"), rapid.Int64Range(1, 200).Draw(t, "duration"))
			it.DeadlineMs = i64(*it.ArrivalMs + *it.DurationMs + rapid.Int64Range(0, 800).Draw(t, "slack"))
			in.Items = append(in.Items, it)
		}
		if naiveEDFMisses(in) > 0 {
			return
		}
		feasible++
		r, err := simulate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range r.Items {
			if it.Missed {
				t.Fatalf("item %s finished at %d after its deadline %d, which EDF meets", it.ID, it.FinishMs, it.DeadlineMs)
			}
		}
	})
	if feasible < 20 {
		t.Fatalf("only %d feasible workloads drawn; the property was barely tested", feasible)
	}
}

// naiveEDFMisses list-schedules the workload: whenever a slot is free, the
// arrived item with the earliest deadline starts and runs to its end.
func naiveEDFMisses(in *simulate.Input) int {
	type job struct{ arrival, dur, dl int64 }
	jobs := make([]job, len(in.Items))
	for i, it := range in.Items {
		jobs[i] = job{*it.ArrivalMs, *it.DurationMs, *it.DeadlineMs}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].arrival < jobs[b].arrival })
	freeAt := make([]int64, in.Slots)
	var queue []job
	next, misses := 0, 0
	t := int64(0)
	for next < len(jobs) || len(queue) > 0 {
		for ; next < len(jobs) && jobs[next].arrival <= t; next++ {
			queue = append(queue, jobs[next])
		}
		started := false
		for s := range freeAt {
			if freeAt[s] <= t && len(queue) > 0 {
				best := 0
				for i := range queue {
					if queue[i].dl < queue[best].dl {
						best = i
					}
				}
				j := queue[best]
				queue = append(queue[:best], queue[best+1:]...)
				freeAt[s] = t + j.dur
				if freeAt[s] > j.dl {
					misses++
				}
				started = true
			}
		}
		if started {
			continue
		}
		// Advance to the next arrival or slot release.
		nt := int64(-1)
		if next < len(jobs) {
			nt = jobs[next].arrival
		}
		for _, f := range freeAt {
			if f > t && (nt < 0 || f < nt) {
				nt = f
			}
		}
		if nt < 0 {
			break
		}
		t = nt
	}
	return misses
}
