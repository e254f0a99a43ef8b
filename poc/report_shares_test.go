package poc

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genRun draws slot usage and arrivals over a 60 s window for up to 4
// Groups, 8 items and 3 slots.
func genRun(t *rapid.T) ([]SlotUsage, []Arrival, map[string]int64) {
	groups := []string{"g0", "g1", "g2", "g3"}[:rapid.IntRange(1, 4).Draw(t, "groups")]
	items := rapid.IntRange(1, 8).Draw(t, "items")
	itemGroup := func(i int) string { return groups[i%len(groups)] }
	outcomes := []Outcome{OutcomeSubmitted, OutcomePreempted, OutcomeFailed, OutcomeExpired, OutcomeInterrupted, OutcomeRunning}
	slots := make([]SlotUsage, rapid.IntRange(1, 3).Draw(t, "slots"))
	for s := range slots {
		slots[s] = SlotUsage{Worker: "w", Slot: s}
		cursor := 0
		for range rapid.IntRange(0, 6).Draw(t, fmt.Sprintf("runs%d", s)) {
			from := cursor + rapid.IntRange(0, 5000).Draw(t, "gap")
			to := from + rapid.IntRange(0, 8000).Draw(t, "len")
			cursor = to
			item := rapid.IntRange(0, items-1).Draw(t, "item")
			slots[s].Intervals = append(slots[s].Intervals, Interval{
				Item: fmt.Sprintf("i%d", item), Group: itemGroup(item),
				From: at(float64(from) / 1000), To: at(float64(to) / 1000),
				Outcome: rapid.SampledFrom(outcomes).Draw(t, "outcome"),
			})
		}
	}
	var arrivals []Arrival
	for i := range items {
		if rapid.Bool().Draw(t, "arrives") {
			arrivals = append(arrivals, Arrival{Item: fmt.Sprintf("i%d", i), Group: itemGroup(i), At: t0.Add(time.Duration(rapid.IntRange(0, 30000).Draw(t, "at")) * time.Millisecond)})
		}
	}
	weights := map[string]int64{}
	for _, g := range groups {
		if rapid.IntRange(0, 4).Draw(t, "hasWeight") > 0 {
			weights[g] = int64(rapid.IntRange(1, 10).Draw(t, "weight"))
		}
	}
	return slots, arrivals, weights
}

// naiveWaits recomputes every wait sample by brute force: sort an item's
// runs by start and take the first one at or after each queue entry.
func naiveWaits(slots []SlotUsage, arrivals []Arrival, end time.Time) map[string][]int64 {
	runs := map[string][]Interval{}
	for _, s := range slots {
		for _, iv := range s.Intervals {
			runs[iv.Item] = append(runs[iv.Item], iv)
		}
	}
	out := map[string][]int64{}
	wait := func(item, group string, q time.Time) {
		rs := slices.Clone(runs[item])
		slices.SortFunc(rs, func(a, b Interval) int { return a.From.Compare(b.From.Time) })
		next := end
		for _, r := range rs {
			if !r.From.Before(q) {
				next = minTime(r.From.Time, end)
				break
			}
		}
		out[group] = append(out[group], max(0, next.Sub(q).Milliseconds()))
	}
	for _, a := range arrivals {
		wait(a.Item, a.Group, a.At)
	}
	for _, rs := range runs {
		for _, r := range rs {
			switch r.Outcome {
			case OutcomePreempted, OutcomeExpired, OutcomeInterrupted:
				wait(r.Item, r.Group, r.To.Time)
			}
		}
	}
	return out
}

func TestComputeGroupsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slots, arrivals, weights := genRun(t)
		end := t0.Add(90 * time.Second)
		got := ComputeGroups(slots, arrivals, weights, end)

		var total int64
		runs, preempted := 0, 0
		for _, s := range slots {
			for _, iv := range s.Intervals {
				total += iv.To.Sub(iv.From.Time).Milliseconds()
				runs++
				if iv.Outcome == OutcomePreempted {
					preempted++
				}
			}
		}
		naive := naiveWaits(slots, arrivals, end)
		var sumMs int64
		var share, wshare float64
		gotRuns, gotPre := 0, 0
		for i, g := range got {
			if i > 0 && got[i-1].ID >= g.ID {
				t.Fatalf("groups not sorted: %v", got)
			}
			sumMs += g.SlotMs
			share += g.Share
			wshare += g.WeightShare
			gotRuns += g.Runs
			gotPre += g.Preemptions
			if g.Weight != weights[g.ID] {
				t.Fatalf("%s weight %d, want %d", g.ID, g.Weight, weights[g.ID])
			}
			ws := naive[g.ID]
			slices.Sort(ws)
			if g.Waits != len(ws) {
				t.Fatalf("%s: %d waits, naive %d", g.ID, g.Waits, len(ws))
			}
			if len(ws) > 0 && (g.WaitMaxMs != ws[len(ws)-1] || g.WaitP50Ms != ws[(len(ws)-1)/2]) {
				t.Fatalf("%s: p50 %d max %d, naive %v", g.ID, g.WaitP50Ms, g.WaitMaxMs, ws)
			}
		}
		if sumMs != total || gotRuns != runs || gotPre != preempted {
			t.Fatalf("slot ms %d/%d runs %d/%d preemptions %d/%d", sumMs, total, gotRuns, runs, gotPre, preempted)
		}
		if total > 0 && math.Abs(share-1) > 1e-9 {
			t.Fatalf("shares sum to %v", share)
		}
		if len(weights) > 0 && math.Abs(wshare-1) > 1e-9 {
			t.Fatalf("weight shares sum to %v", wshare)
		}

		// The answer does not depend on input order.
		perm := slices.Clone(slots)
		slices.Reverse(perm)
		for i := range perm {
			perm[i].Intervals = slices.Clone(perm[i].Intervals)
			slices.Reverse(perm[i].Intervals)
		}
		arr := slices.Clone(arrivals)
		slices.Reverse(arr)
		if again := ComputeGroups(perm, arr, weights, end); !slices.Equal(again, got) {
			t.Fatalf("order changed the result:\n%v\n%v", got, again)
		}
	})
}
