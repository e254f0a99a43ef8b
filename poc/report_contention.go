package poc

import (
	"cmp"
	"slices"
	"time"
)

// ContentionTolerance is how far (in share points) a Group's share of
// slot-time in the contention window may be from its share of the weights
// for the demonstration of weighted fair sharing to count as shown.
const ContentionTolerance = 0.10

// Contention is the span in which every Group had work waiting (an item
// eligible to run and not running), the one in which slots ran the most
// work: while all are backlogged, weighted fair sharing promises each its
// weight share of the slot-time. The shares are of the runs the scheduler
// started inside the span, each at its whole length (its decisions under
// contention), and of the time inside the span of the runs started before
// it, when not every Group was waiting (one Mission's tests ending
// first): a weighted fair scheduler charges those runs to their Group and
// gives the other Group the slot-time back once both wait, so leaving the
// carried time out would count the repayment as unfairness (a Group with a
// 0.7 s head start then read 0.72 against 0.667, and a weight-blind
// scheduler's 0.5 crept towards the tolerance); with it counted both come
// out at their weight shares. FromMs and ToMs are offsets from the start
// of the report's span.
type Contention struct {
	FromMs int64             `json:"fromMs"`
	ToMs   int64             `json:"toMs"`
	Groups []ContentionShare `json:"groups"`
	// Within says every Group's slotShare is within ContentionTolerance
	// of its weightShare.
	Within bool `json:"withinTolerance"`
}

// ContentionShare is one Group's service inside the window.
type ContentionShare struct {
	GroupID     string  `json:"groupId"`
	WeightShare float64 `json:"weightShare"`
	SlotShare   float64 `json:"slotShare"`
	// SlotMs is the slot-time the share is of: runs started in the
	// window, whole, and CarriedMs.
	SlotMs int64 `json:"slotMs"`
	Runs   int   `json:"runs"` // runs started in the window
	// CarriedMs is the slot-time inside the window of the Group's runs
	// started before it.
	CarriedMs int64 `json:"carriedMs"`
	// LQFShare is the share longest-queue-first would have given it on
	// the same backlogs and slots (LongestQueueFirst): a check that a
	// naive policy also passes proves nothing.
	LQFShare float64 `json:"longestQueueFirstShare"`
}

// ComputeContention finds the contention window of a run and each Group's
// share of slot-time in it; nil when there is no moment at which every
// Group with a weight had work waiting. Pure, like ComputeGroups, and with
// the same notion of waiting: from an arrival (or a return to the queue)
// to the item's next run start.
func ComputeContention(slots []SlotUsage, arrivals []Arrival, weights map[string]int64, origin, end time.Time) *Contention {
	var groups []string
	for id, w := range weights {
		if w > 0 {
			groups = append(groups, id)
		}
	}
	if len(groups) < 2 {
		return nil
	}
	slices.Sort(groups)
	waiting := waitSpans(slots, arrivals, end)
	common := waiting[groups[0]]
	for _, g := range groups[1:] {
		common = intersect(common, waiting[g])
	}
	// Of the spans in which every Group waited, the one in which the
	// scheduler started the most runs (then the most slot-time): the
	// shares are of its decisions, and a span holding two long runs
	// started before it says little about them. Waiting while no slot
	// runs (a worker restarting) is no contention for slots.
	var best [2]time.Time
	var bestRuns int
	var bestMs int64
	for _, sp := range common {
		runs, ms := runsStartedIn(slots, sp), slotMsIn(slots, sp)
		if runs > bestRuns || runs == bestRuns && ms > bestMs {
			best, bestRuns, bestMs = sp, runs, ms
		}
	}
	if bestRuns == 0 || bestMs == 0 {
		return nil
	}
	c := &Contention{FromMs: best[0].Sub(origin).Milliseconds(), ToMs: best[1].Sub(origin).Milliseconds(), Within: true}
	var total, weightSum int64
	by := map[string]*ContentionShare{}
	for _, g := range groups {
		by[g] = &ContentionShare{GroupID: g}
		weightSum += weights[g]
	}
	for _, s := range slots {
		for _, iv := range s.Intervals {
			g := by[iv.Group]
			switch {
			case g == nil:
			case !iv.From.Before(best[0]) && !iv.From.After(best[1]):
				ms := iv.To.Sub(iv.From.Time).Milliseconds()
				g.SlotMs += ms
				g.Runs++
				total += ms
			case iv.From.Before(best[0]) && iv.To.After(best[0]):
				ms := minTime(iv.To.Time, best[1]).Sub(best[0]).Milliseconds()
				g.CarriedMs += ms
				g.SlotMs += ms
				total += ms
			}
		}
	}
	lqf := LongestQueueFirst(backlog(slots, arrivals, best[0], best[1], end), slotsIn(slots, best))
	for _, g := range groups {
		cs := by[g]
		cs.LQFShare = lqf[g]
		cs.WeightShare = float64(weights[g]) / float64(weightSum)
		if total > 0 {
			cs.SlotShare = float64(cs.SlotMs) / float64(total)
		}
		if d := cs.SlotShare - cs.WeightShare; d > ContentionTolerance || d < -ContentionTolerance {
			c.Within = false
		}
		c.Groups = append(c.Groups, *cs)
	}
	slices.SortFunc(c.Groups, func(a, b ContentionShare) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return c
}

// runsStartedIn counts the runs started inside span.
func runsStartedIn(slots []SlotUsage, span [2]time.Time) int {
	n := 0
	for _, s := range slots {
		for _, iv := range s.Intervals {
			if !iv.From.Before(span[0]) && !iv.From.After(span[1]) {
				n++
			}
		}
	}
	return n
}

// slotMsIn is the slot-time of every run inside span.
func slotMsIn(slots []SlotUsage, span [2]time.Time) int64 {
	var ms int64
	for _, s := range slots {
		for _, iv := range s.Intervals {
			if a, b := maxTime(iv.From.Time, span[0]), minTime(iv.To.Time, span[1]); b.After(a) {
				ms += b.Sub(a).Milliseconds()
			}
		}
	}
	return ms
}

// waitSpans is, per Group, the union of the spans in which one of its
// items waited.
func waitSpans(slots []SlotUsage, arrivals []Arrival, end time.Time) map[string][][2]time.Time {
	starts, queued, group := queueMoments(slots, arrivals)
	spans := map[string][][2]time.Time{}
	for item, qs := range queued {
		for _, q := range qs {
			next := end
			for _, st := range starts[item] {
				if !st.Before(q) && st.Before(next) {
					next = st
				}
			}
			if next.After(q) {
				g := group[item]
				spans[g] = append(spans[g], [2]time.Time{q, next})
			}
		}
	}
	for g, s := range spans {
		spans[g] = union(s)
	}
	return spans
}

// union merges overlapping spans; the result is sorted and disjoint.
func union(s [][2]time.Time) [][2]time.Time {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	var out [][2]time.Time
	for _, x := range s {
		if n := len(out); n > 0 && !x[0].After(out[n-1][1]) {
			out[n-1][1] = maxTime(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// intersect is the intersection of two sorted, disjoint span lists.
func intersect(a, b [][2]time.Time) [][2]time.Time {
	var out [][2]time.Time
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := maxTime(a[i][0], b[j][0]), minTime(a[i][1], b[j][1])
		if hi.After(lo) {
			out = append(out, [2]time.Time{lo, hi})
		}
		if a[i][1].Before(b[j][1]) {
			i++
		} else {
			j++
		}
	}
	return out
}

// queueMoments is, per item, when its runs started, when it entered its
// queue (its arrival, and the end of a run that put it back: preempted,
// expired, interrupted) and its Group: the one rule both the contention
// window and longest-queue-first read waiting from.
func queueMoments(slots []SlotUsage, arrivals []Arrival) (starts, queued map[string][]time.Time, group map[string]string) {
	starts, queued, group = map[string][]time.Time{}, map[string][]time.Time{}, map[string]string{}
	for _, s := range slots {
		for _, iv := range s.Intervals {
			starts[iv.Item] = append(starts[iv.Item], iv.From.Time)
			group[iv.Item] = iv.Group
			if iv.Outcome == OutcomePreempted || iv.Outcome == OutcomeExpired || iv.Outcome == OutcomeInterrupted {
				queued[iv.Item] = append(queued[iv.Item], iv.To.Time)
			}
		}
	}
	for _, a := range arrivals {
		queued[a.Item] = append(queued[a.Item], a.At)
		group[a.Item] = a.Group
	}
	return starts, queued, group
}
