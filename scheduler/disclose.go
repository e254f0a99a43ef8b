package scheduler

import (
	"fmt"
	"math"
	"time"
)

// Disclose computes the schedule disclosure for an accepted item (11.2).
//
// It reads only the item's own Group (its queue order, running items and
// observed durations) and aggregate load: the slot count, how many slots are
// free and the total weight of active Groups. Nothing about another Group's
// items — names, contents, durations or positions — enters the result, so it
// cannot be derived from it. Cost: O(items queued in the item's Group).
func (s *Scheduler) Disclose(id string, now time.Time) (Disclosure, error) {
	e := s.items.get(id)
	if e == nil {
		return Disclosure{}, fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	t := ms(now)
	g := e.g
	d := Disclosure{ComputedAt: wall(t), CapacityState: s.capacityState(e)}
	n := max(g.obsCount, int64(e.item.Observed))
	conf := float64(n) / float64(n+4)

	if e.state == StateRunning || e.state == StatePreempting {
		d.EstimatedStartWindow = Window{From: wall(e.startMs), To: wall(e.startMs)}
		d.EstimatedCompletion = wall(max(e.startMs+e.est, t))
		if t > e.startMs+e.est {
			conf /= 2 // overrunning its estimate
		}
		d.Confidence = round2(conf)
		return d, nil
	}

	// Own work that goes first: queued items ahead of e, plus what remains
	// of the Group's running items.
	var ahead int64
	h := &g.heaps[byAging]
	for i := range h.a {
		n := &h.a[i]
		if y := h.entry(n); h.alive(n) && y != e && s.before(y, e, t) {
			ahead += y.est
		}
	}
	for i := range s.slots {
		if r := s.slots[i].e; r != nil && r.g == g {
			ahead += max(r.startMs+r.est-t, 0)
		}
	}
	best := float64(g.quota) // every other Group idle
	w := s.activeWeight
	if !g.active {
		w += g.weight
	}
	fair := math.Min(float64(g.quota), math.Max(1, float64(s.cfg.Slots)*float64(g.weight)/float64(w)))
	slotWait := int64(0)
	if d.CapacityState != CapacityAvailable {
		// Until some slot frees; the Group's own typical run stands in for
		// the unknown runs of others.
		slotWait = e.est
		if g.obsCount > 0 {
			slotWait = g.obsMean
		}
	}
	// The earliest start has the start latency on top of the best case;
	// the latest allows a second start round trip (a start refused and
	// tried again) and widens with the doubt of the estimates: by
	// (1 − confidence) of the expected wait.
	wait := slotWait + int64(math.Ceil(float64(ahead)/fair))
	from := t + int64(math.Ceil(float64(ahead)/best)) + s.latMs
	to := t + wait + 2*s.latMs + int64(math.Ceil(float64(wait)*(1-conf)))
	d.EstimatedStartWindow = Window{From: wall(from), To: wall(to)}
	d.EstimatedCompletion = wall(to + e.est)
	switch {
	case e.state == StateBlocked, d.CapacityState == CapacityOffline:
		conf = 0 // starts only after an outside event
	case d.CapacityState == CapacitySaturated:
		conf /= 2
	}
	d.Confidence = round2(conf)
	return d, nil
}

// before reports whether queued y goes ahead of queued e: items whose
// deadline slack is inside SlackWindow first (by deadline), then aging order.
func (s *Scheduler) before(y, e *entry, now int64) bool {
	ry := y.hasDeadline() && y.latest() <= now+s.slackMs
	re := e.hasDeadline() && e.latest() <= now+s.slackMs
	switch {
	case ry != re:
		return ry
	case ry && y.dl != e.dl:
		return y.dl < e.dl
	case y.ta != e.ta:
		return y.ta < e.ta
	}
	return y.seq < e.seq
}

func (s *Scheduler) capacityState(e *entry) CapacityState {
	g := e.g
	switch {
	case s.offline:
		return CapacityOffline
	case g.running < g.quota && s.free > 0 && s.fitSlot(e) >= 0:
		return CapacityAvailable
	case g.running < g.quota && int64(g.running)*s.activeWeight < int64(s.cfg.Slots)*g.weight:
		return CapacityConstrained // below its share: it gets the next fitting slot
	}
	return CapacitySaturated
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
