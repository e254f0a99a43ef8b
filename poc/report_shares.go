package poc

import (
	"cmp"
	"slices"
	"time"
)

// Arrival is the moment a WorkItem became eligible to run in its Group's
// queue (offer accepted and dependencies met).
type Arrival struct {
	Item  string
	Group string
	At    time.Time
}

// ComputeGroups derives each Group's service from slot intervals: slot-time
// (SlotMs) and its share of all slot-time against the Group's share of the
// weights, queue waits, runs and preemptions. It is pure and does not
// depend on the order of its inputs.
//
// A wait starts when an item arrives and whenever it goes back to its queue
// (a run that ended preempted, lease_expired or interrupted) and ends at the
// item's next run start; an item still waiting at end counts up to end.
// Groups are those named by weights, intervals or arrivals, sorted by id; a
// Group missing from weights has weight 0.
func ComputeGroups(slots []SlotUsage, arrivals []Arrival, weights map[string]int64, end time.Time) []GroupShare {
	type runAt struct {
		from, to time.Time
		outcome  Outcome
	}
	by := map[string]*GroupShare{}
	group := func(id string) *GroupShare {
		g, ok := by[id]
		if !ok {
			g = &GroupShare{ID: id, Weight: weights[id]}
			by[id] = g
		}
		return g
	}
	for id := range weights {
		group(id)
	}
	runs := map[string][]runAt{} // item -> runs
	itemGroup := map[string]string{}
	var total int64
	for _, s := range slots {
		for _, iv := range s.Intervals {
			g := group(iv.Group)
			ms := max(iv.To.Sub(iv.From.Time).Milliseconds(), 0)
			g.SlotMs += ms
			total += ms
			g.Runs++
			if iv.Outcome == OutcomePreempted {
				g.Preemptions++
			}
			runs[iv.Item] = append(runs[iv.Item], runAt{iv.From.Time, iv.To.Time, iv.Outcome})
			itemGroup[iv.Item] = iv.Group
		}
	}
	queued := map[string][]time.Time{} // item -> moments it entered its queue
	for _, a := range arrivals {
		group(a.Group)
		queued[a.Item] = append(queued[a.Item], a.At)
		itemGroup[a.Item] = a.Group
	}
	for item, rs := range runs {
		for _, r := range rs {
			if r.outcome == OutcomePreempted || r.outcome == OutcomeExpired || r.outcome == OutcomeInterrupted {
				queued[item] = append(queued[item], r.to)
			}
		}
	}
	waits := map[string][]int64{}
	for item, qs := range queued {
		rs := runs[item]
		for _, q := range qs {
			next := end
			for _, r := range rs {
				if !r.from.Before(q) && r.from.Before(next) {
					next = r.from
				}
			}
			g := itemGroup[item]
			waits[g] = append(waits[g], max(next.Sub(q).Milliseconds(), 0))
		}
	}
	var weightSum int64
	for _, g := range by {
		weightSum += g.Weight
	}
	out := make([]GroupShare, 0, len(by))
	for id, g := range by {
		if total > 0 {
			g.Share = float64(g.SlotMs) / float64(total)
		}
		if weightSum > 0 {
			g.WeightShare = float64(g.Weight) / float64(weightSum)
		}
		ws := waits[id]
		slices.Sort(ws)
		g.Waits = len(ws)
		if len(ws) > 0 {
			g.WaitP50Ms = ws[(len(ws)+1)/2-1] // nearest rank
			g.WaitMaxMs = ws[len(ws)-1]
		}
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GroupShare) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Busy returns the fraction of [from, to) during which slot s ran work.
func (s SlotUsage) Busy(from, to time.Time) float64 {
	span := to.Sub(from)
	if span <= 0 {
		return 0
	}
	var busy time.Duration
	for _, iv := range s.Intervals {
		a, b := maxTime(iv.From.Time, from), minTime(iv.To.Time, to)
		if b.After(a) {
			busy += b.Sub(a)
		}
	}
	return float64(busy) / float64(span)
}

// Span returns the earliest start and latest end over every interval and
// approval moment of r; both zero when there are none.
func (r *Report) Span() (from, to time.Time) {
	widen := func(a, b time.Time) {
		if from.IsZero() || a.Before(from) {
			from = a
		}
		if to.IsZero() || b.After(to) {
			to = b
		}
	}
	for _, s := range r.Slots {
		for _, iv := range s.Intervals {
			widen(iv.From.Time, iv.To.Time)
		}
	}
	for _, a := range r.Approvals {
		widen(a.At.Time, a.At.Time)
	}
	return from, to
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
