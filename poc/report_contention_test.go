package poc

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestComputeContention(t *testing.T) {
	w := map[string]int64{"grp-a": 4, "grp-b": 2}
	end := t0.Add(10 * time.Second)
	// Both Groups backlogged from 1 s to 7 s; a gets two slots of three.
	busy := []SlotUsage{
		{Worker: "w", Slot: 0, Intervals: []Interval{iv("a1", "grp-a", 1, 4, OutcomeSubmitted), iv("a3", "grp-a", 4, 7, OutcomeSubmitted), iv("a4", "grp-a", 7, 9, OutcomeSubmitted)}},
		{Worker: "w", Slot: 1, Intervals: []Interval{iv("a2", "grp-a", 1, 4, OutcomeSubmitted), iv("a5", "grp-a", 4, 7, OutcomeSubmitted), iv("b2", "grp-b", 7, 9, OutcomeSubmitted)}},
		{Worker: "w", Slot: 2, Intervals: []Interval{iv("b1", "grp-b", 1, 7, OutcomeSubmitted)}},
	}
	var arrivals []Arrival
	for _, it := range []string{"a1", "a2", "a3", "a4", "a5"} {
		arrivals = append(arrivals, Arrival{Item: it, Group: "grp-a", At: t0})
	}
	arrivals = append(arrivals, Arrival{Item: "b1", Group: "grp-b", At: t0}, Arrival{Item: "b2", Group: "grp-b", At: t0})
	c := ComputeContention(busy, arrivals, w, t0, end)
	if c == nil || c.FromMs != 0 || c.ToMs != 7000 || len(c.Groups) != 2 {
		t.Fatalf("contention %+v", c)
	}
	// Every run started in the window counts whole, the two started as it
	// ends (the last waiting item's start ends it) included.
	a, b := c.Groups[0], c.Groups[1]
	if a.GroupID != "grp-a" || a.SlotMs != 14000 || a.Runs != 5 || b.SlotMs != 8000 || b.Runs != 2 || a.CarriedMs+b.CarriedMs != 0 || math.Abs(a.WeightShare-2.0/3) > 1e-9 {
		t.Errorf("shares %+v %+v", a, b)
	}
	if !c.Within {
		t.Errorf("a %.3f of slot-time against %.3f of the weights is within %.2f", a.SlotShare, a.WeightShare, ContentionTolerance)
	}

	// A run started before grp-a waited is carried into the window: grp-b
	// had a head start (b0, 2 s of it inside the window), and the
	// scheduler gave it back to grp-a once both waited (a0–a3 against b1).
	// Counted, grp-a has two thirds; left out, it would read 0.8.
	carried := []SlotUsage{
		{Worker: "w", Slot: 0, Intervals: []Interval{iv("b0", "grp-b", 0, 3, OutcomeSubmitted), iv("a1", "grp-a", 3, 5, OutcomeSubmitted), iv("a3", "grp-a", 5, 7, OutcomeSubmitted)}},
		{Worker: "w", Slot: 1, Intervals: []Interval{iv("bx", "grp-b", 0, 1, OutcomeSubmitted), iv("a0", "grp-a", 1, 3, OutcomeSubmitted), iv("a2", "grp-a", 3, 5, OutcomeSubmitted), iv("b1", "grp-b", 5, 7, OutcomeSubmitted)}},
	}
	ca := []Arrival{{Item: "b0", Group: "grp-b", At: t0}, {Item: "bx", Group: "grp-b", At: t0}, {Item: "b1", Group: "grp-b", At: t0}}
	for _, it := range []string{"a0", "a1", "a2", "a3"} {
		ca = append(ca, Arrival{Item: it, Group: "grp-a", At: at(1).Time})
	}
	c = ComputeContention(carried, ca, w, t0, end)
	if c == nil || c.FromMs != 1000 || c.ToMs != 5000 {
		t.Fatalf("contention %+v", c)
	}
	if a, b := c.Groups[0], c.Groups[1]; a.CarriedMs != 0 || a.SlotMs != 8000 || a.Runs != 4 || b.CarriedMs != 2000 || b.SlotMs != 4000 || b.Runs != 1 || !c.Within ||
		math.Abs(a.SlotShare-2.0/3) > 1e-9 {
		t.Errorf("carried %+v %+v", a, b)
	}

	// Equal service against 4:2 weights is not within the tolerance.
	even := []SlotUsage{{Worker: "w", Slot: 0, Intervals: []Interval{iv("a1", "grp-a", 0, 5, OutcomeSubmitted), iv("a2", "grp-a", 5, 6, OutcomeSubmitted)}},
		{Worker: "w", Slot: 1, Intervals: []Interval{iv("b1", "grp-b", 0, 5, OutcomeSubmitted), iv("b2", "grp-b", 5, 6, OutcomeSubmitted)}}}
	ev := []Arrival{{Item: "a1", Group: "grp-a", At: t0}, {Item: "a2", Group: "grp-a", At: t0}, {Item: "b1", Group: "grp-b", At: t0}, {Item: "b2", Group: "grp-b", At: t0}}
	if c := ComputeContention(even, ev, w, t0, end); c == nil || c.Within {
		t.Errorf("even service judged within: %+v", c)
	}

	// Never both waiting: no window. Both waiting while nothing ran (a
	// worker restarting): no window either.
	apart := []Arrival{{Item: "a1", Group: "grp-a", At: t0}, {Item: "b1", Group: "grp-b", At: at(3).Time}}
	runs := []SlotUsage{{Worker: "w", Slot: 0, Intervals: []Interval{iv("a1", "grp-a", 0, 3, OutcomeSubmitted), iv("b1", "grp-b", 3, 5, OutcomeSubmitted)}}}
	if c := ComputeContention(runs, apart, w, t0, end); c != nil {
		t.Errorf("no common wait, got %+v", c)
	}
	idle := []SlotUsage{{Worker: "w", Slot: 0, Intervals: []Interval{iv("a1", "grp-a", 5, 6, OutcomeSubmitted), iv("b1", "grp-b", 6, 7, OutcomeSubmitted)}}}
	both := []Arrival{{Item: "a1", Group: "grp-a", At: t0}, {Item: "b1", Group: "grp-b", At: t0}}
	if c := ComputeContention(idle, both, w, t0, end); c != nil {
		t.Errorf("waiting with no slot running is not contention, got %+v", c)
	}
	if c := ComputeContention(busy, arrivals, map[string]int64{"grp-a": 4}, t0, end); c != nil {
		t.Errorf("one Group cannot contend, got %+v", c)
	}
}

func TestLongestQueueFirst(t *testing.T) {
	ones := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = 100
		}
		return out
	}
	cases := []struct {
		name     string
		backlogs map[string][]int64
		slots    int
		wantA    float64
	}{
		// Equal queues: it alternates (a tie goes to grp-a first) until
		// grp-a is empty: 16 runs against 15, about half each, whatever
		// the weights.
		{"equal", map[string][]int64{"grp-a": ones(16), "grp-b": ones(16)}, 2, 16.0 / 31},
		// The longer queue is served until they are level (8 runs of
		// grp-a), then they alternate, grp-b first (fewer runs), until
		// grp-b is empty: 15 of 23.
		{"longer first", map[string][]int64{"grp-a": ones(16), "grp-b": ones(8)}, 2, 15.0 / 23},
		// Runs are weighed by their length: a, b, a.
		{"lengths", map[string][]int64{"grp-a": {300, 300}, "grp-b": {100, 100}}, 1, 6.0 / 7},
		{"one empty", map[string][]int64{"grp-a": ones(3), "grp-b": nil}, 2, 0},
	}
	for _, c := range cases {
		got := LongestQueueFirst(c.backlogs, c.slots)["grp-a"]
		if math.Abs(got-c.wantA) > 1e-9 {
			t.Errorf("%s: grp-a %.4f, want %.4f", c.name, got, c.wantA)
		}
	}
}

// The contention window reports what longest-queue-first would have given
// on the same backlogs: equal backlogs, half each, against the 4:2 weights.
func TestContentionLQFShare(t *testing.T) {
	w := map[string]int64{"grp-a": 4, "grp-b": 2}
	var arrivals []Arrival
	var s0, s1 []Interval
	for i := range 6 {
		a, b := "a"+string(rune('0'+i)), "b"+string(rune('0'+i))
		arrivals = append(arrivals, Arrival{Item: a, Group: "grp-a", At: t0}, Arrival{Item: b, Group: "grp-b", At: t0})
		// Weighted fair: grp-a runs in slot 0 throughout and every other
		// run of slot 1; grp-b waits for the rest.
		s0 = append(s0, iv(a, "grp-a", float64(i), float64(i+1), OutcomeSubmitted))
		if i%2 == 0 {
			s1 = append(s1, iv(b, "grp-b", float64(i), float64(i+1), OutcomeSubmitted))
		}
	}
	c := ComputeContention([]SlotUsage{{Worker: "w", Slot: 0, Intervals: s0}, {Worker: "w", Slot: 1, Intervals: s1}}, arrivals, w, t0, t0.Add(10*time.Second))
	if c == nil {
		t.Fatal("no contention")
	}
	a, b := c.Groups[0], c.Groups[1]
	// Six each (grp-b's three still waiting at the end counted at their
	// mean length): six runs against five.
	if math.Abs(a.LQFShare-6.0/11) > 1e-9 || math.Abs(b.LQFShare-5.0/11) > 1e-9 {
		t.Errorf("longest-queue-first on equal backlogs: %.3f / %.3f, want 6/11 and 5/11", a.LQFShare, b.LQFShare)
	}
	if math.Abs(a.SlotShare-2.0/3) > 0.01 || !c.Within {
		t.Errorf("weighted: %+v", c)
	}
}

// The contention window is, of the spans in which every Group waited, the
// one in which the scheduler started the most runs, then the one with the
// most slot-time. Each case has a span that another rule would pick: the
// first, the longest, the one with the most slot-time, the last.
func TestContentionWindowChoice(t *testing.T) {
	w := map[string]int64{"grp-a": 4, "grp-b": 2}
	// phase lays out one span on two slots from start: per slot, runs of
	// length d (seconds) of the Group's items, all arrived at start, so
	// each Group waits until its last item starts.
	type run struct {
		item, group string
		from, to    float64
	}
	phase := func(start float64, n int, d float64) []run {
		var rs []run
		for i := 0; i < n; i++ {
			from := start + float64(i)*d
			rs = append(rs, run{fmt.Sprintf("a%g-%d", start, i), "grp-a", from, from + d}, run{fmt.Sprintf("b%g-%d", start, i), "grp-b", from, from + d})
		}
		return rs
	}
	build := func(phases ...[]run) ([]SlotUsage, []Arrival) {
		s := []SlotUsage{{Worker: "w", Slot: 0}, {Worker: "w", Slot: 1}}
		var arr []Arrival
		for _, ph := range phases {
			for _, r := range ph {
				slot := 0
				if r.group == "grp-b" {
					slot = 1
				}
				s[slot].Intervals = append(s[slot].Intervals, iv(r.item, r.group, r.from, r.to, OutcomeSubmitted))
				arr = append(arr, Arrival{Item: r.item, Group: r.group, At: at(ph[0].from).Time})
			}
		}
		return s, arr
	}
	cases := []struct {
		name     string
		phases   [][]run
		from, to int64 // the window chosen, ms
	}{
		// 0–6 s: the first and longest span, with the most slot-time: 4
		// starts (two a Group, at 0 s and 6 s); 7–8 s: 6 starts; 9–9.5 s,
		// the last: 4.
		{"most runs started", [][]run{phase(0, 2, 6), phase(7, 3, 0.5), phase(9, 2, 0.5)}, 7000, 8000},
		// Two spans with 6 starts each: the one with more slot-time, second
		// or first.
		{"then most slot-time", [][]run{phase(0, 3, 0.5), phase(7, 3, 0.75)}, 7000, 8500},
		{"then most slot-time, first", [][]run{phase(0, 3, 0.75), phase(7, 3, 0.5)}, 0, 1500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			slots, arr := build(c.phases...)
			got := ComputeContention(slots, arr, w, t0, t0.Add(20*time.Second))
			if got == nil || got.FromMs != c.from || got.ToMs != c.to {
				t.Fatalf("window %+v, want %d–%d ms", got, c.from, c.to)
			}
		})
	}
}
