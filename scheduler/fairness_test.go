package scheduler_test

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/scheduler/simulate"
)

// (a) Weights 1:2:4, all backlogged: over 10,000 decisions each Group's share
// of slot-time is within 2% (relative) of its weight share.
func TestFairShareWeights124(t *testing.T) {
	t.Parallel()
	weights := map[string]int64{"g1": 1, "g2": 2, "g3": 4}
	for _, tc := range []struct {
		name   string
		slots  int
		lo, hi int64
	}{
		{"one slot, equal durations", 1, 100, 100},
		{"four slots, mixed durations", 4, 10, 500},
		{"seven slots, short and long", 7, 1, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// 10,000 items per Group: every Group stays backlogged past
			// the 10,000th decision whatever its share.
			in := backlog(7, tc.slots, weights, 10_000, tc.lo, tc.hi)
			r, err := simulate.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			starts := 0
			var cut int64
			for _, e := range r.Events {
				if e.Action == "start" {
					starts++
					if starts == 10_000 {
						cut = e.AtMs
						break
					}
				}
			}
			if starts < 10_000 {
				t.Fatalf("only %d decisions", starts)
			}
			used := slotTimeUntil(r, cut)
			var total int64
			for _, v := range used {
				total += v
			}
			for g, w := range weights {
				want := float64(w) / 7
				got := float64(used[g]) / float64(total)
				if rel := math.Abs(got-want) / want; rel > 0.02 {
					t.Errorf("group %s: share %.4f, weight share %.4f (off by %.2f%%)", g, got, want, rel*100)
				}
			}
		})
	}
}

// (b) A low-urgency item in a weight-1 Group, under a continuous flood of
// critical items in a heavier Group, starts within R(1) of doc.go.
func TestStarvationBoundUnderCriticalFlood(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		slots       int
		floodWeight int64
		duration    int64
		arriveAt    int64
	}{
		{"one slot, equal weights", 1, 1, 100, 555},
		{"two slots, weight 8 flood", 2, 8, 100, 1_000},
		{"four slots, weight 50 flood, long items", 4, 50, 2_000, 7_777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := &simulate.Input{Slots: tc.slots, Groups: []simulate.GroupSpec{
				{ID: "light", Weight: 1}, {ID: "flood", Weight: tc.floodWeight},
			}}
			// The flood keeps 2× the slots' worth of critical work arriving
			// until well after the low item.
			horizon := tc.arriveAt + 50*tc.duration*int64(tc.slots)
			step := tc.duration / 2
			n := 0
			for at := int64(0); at < horizon; at += step {
				for range tc.slots {
					n++
					in.Items = append(in.Items, item(fmt.Sprintf("c%d", n), "flood", "critical", at, tc.duration))
				}
			}
			in.Items = append(in.Items, item("low", "light", "low", tc.arriveAt, tc.duration))
			r, err := simulate.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			low := r.Items[len(r.Items)-1]
			wait := low.FirstStartMs - low.ArrivalMs
			bound := boundR(in, "light", 1, maxDuration(in))
			t.Logf("wait %d ms, bound R(1) = %.0f ms", wait, bound)
			if float64(wait) > bound {
				t.Fatalf("low item waited %d ms, bound %.0f ms", wait, bound)
			}
		})
	}
}

// (d) The same inputs and clock give the same decisions.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	in := backlog(42, 3, map[string]int64{"g1": 1, "g2": 3, "g3": 5}, 300, 1, 300)
	for i := range in.Items {
		if i%7 == 0 {
			in.Items[i].DeadlineMs = i64(int64(i) * 40)
		}
		*in.Items[i].ArrivalMs = int64(i * 13 % 5000)
	}
	in.CheckpointMs = 3
	first, err := simulate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := simulate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatal("two runs of the same workload differ")
		}
	}
	if first.Summary.Preemptions == 0 {
		t.Fatal("workload meant to exercise preemption had none")
	}
}
