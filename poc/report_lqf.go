package poc

import (
	"slices"
	"time"
)

// What longest-queue-first would have given: the contention window's
// shares are compared with the weights and with this naive policy, so a
// reader sees that the backlogs alone do not produce the weight shares (with
// backlogs in the ratio of the weights, any scheduler that keeps both queues
// moving lands near the weight shares, and the comparison proves nothing).

// backlog is, per Group, the run lengths (ms) of the items that waited in
// the window [from, to]: those started in it at their run's length, and
// those still waiting at its end at the mean length of the Group's runs in
// it (of every run in the window when the Group started none).
func backlog(slots []SlotUsage, arrivals []Arrival, from, to, end time.Time) map[string][]int64 {
	out := map[string][]int64{}
	started := map[string]bool{}
	var all []int64
	for _, s := range slots {
		for _, iv := range s.Intervals {
			if iv.From.Before(from) || iv.From.After(to) {
				continue
			}
			ms := iv.To.Sub(iv.From.Time).Milliseconds()
			out[iv.Group] = append(out[iv.Group], ms)
			all = append(all, ms)
			started[iv.Item] = true
		}
	}
	waitingAtEnd := map[string]int{}
	for g, spans := range itemWaits(slots, arrivals, end) {
		for item, sp := range spans {
			if !started[item] && !sp[0].After(to) && sp[1].After(to) {
				waitingAtEnd[g]++
			}
		}
	}
	for g, n := range waitingAtEnd {
		m := mean(out[g])
		if m == 0 {
			m = mean(all)
		}
		for range n {
			out[g] = append(out[g], m)
		}
	}
	return out
}

func mean(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	var s int64
	for _, x := range xs {
		s += x
	}
	return s / int64(len(xs))
}

// itemWaits is, per Group and item, the item's last wait span that began
// by end: from its arrival (or return to the queue) to its next run start
// (end when it never started again).
func itemWaits(slots []SlotUsage, arrivals []Arrival, end time.Time) map[string]map[string][2]time.Time {
	starts, queued, group := queueMoments(slots, arrivals)
	out := map[string]map[string][2]time.Time{}
	for item, qs := range queued {
		q := slices.MaxFunc(qs, func(a, b time.Time) int { return a.Compare(b) })
		next := end
		for _, st := range starts[item] {
			if !st.Before(q) && st.Before(next) {
				next = st
			}
		}
		g := group[item]
		if out[g] == nil {
			out[g] = map[string][2]time.Time{}
		}
		out[g][item] = [2]time.Time{q, next}
	}
	return out
}

// LongestQueueFirst simulates that policy on the backlogs (per Group, the
// run lengths of its waiting items, in order) with nSlots slots: each time
// a slot frees, the Group with the most items waiting starts its next one
// (ties to the Group that started fewer runs, then by id). It stops at the
// first decision at which a Group has nothing waiting, as the contention
// window does, and returns each Group's share of the slot-time of the runs
// started. Pure.
func LongestQueueFirst(backlogs map[string][]int64, nSlots int) map[string]float64 {
	groups := make([]string, 0, len(backlogs))
	for g := range backlogs {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	next := map[string]int{}
	ms := map[string]int64{}
	var total int64
	free := make([]int64, max(nSlots, 1)) // when each slot is free next
	for {
		var pick string
		for _, g := range groups {
			left := len(backlogs[g]) - next[g]
			if left == 0 {
				pick = ""
				break
			}
			if pl := len(backlogs[pick]) - next[pick]; pick == "" || left > pl || (left == pl && next[g] < next[pick]) {
				pick = g
			}
		}
		if pick == "" {
			break
		}
		i := slices.Index(free, slices.Min(free))
		d := backlogs[pick][next[pick]]
		next[pick]++
		free[i] += max(d, 1)
		ms[pick] += d
		total += d
	}
	out := map[string]float64{}
	for _, g := range groups {
		if total > 0 {
			out[g] = float64(ms[g]) / float64(total)
		}
	}
	return out
}

// slotsIn counts the slots that ran work in the window.
func slotsIn(slots []SlotUsage, span [2]time.Time) int {
	n := 0
	for _, s := range slots {
		for _, iv := range s.Intervals {
			if iv.From.Before(span[1]) && iv.To.After(span[0]) {
				n++
				break
			}
		}
	}
	return n
}
