package scheduler

import (
	"fmt"
	"math"
	"time"
)

// pressed reports whether an item is overdue on its aging bound, and
// whether its deadline slack is inside SlackWindow.
func (s *Scheduler) pressed(e *entry, now int64) (overdue, deadline bool) {
	return e.ta <= now, e.hasDeadline() && e.latest() <= now+s.slackMs
}

// prioCmp compares effective priority for preemption (>0: a ranks higher).
// Pressed items (overdue or deadline at risk) rank above the rest; between
// two deadline-pressed items only the deadline counts (EDF); otherwise
// urgency, then business impact.
func (s *Scheduler) prioCmp(a, b *entry, now int64) int {
	ao, ad := s.pressed(a, now)
	bo, bd := s.pressed(b, now)
	if ap, bp := ao || ad, bo || bd; ap != bp {
		if ap {
			return 1
		}
		return -1
	}
	if ad && bd {
		// Both racing their deadlines: only an earlier deadline justifies
		// taking the slot, whatever the urgencies say.
		switch {
		case a.dl < b.dl:
			return 1
		case a.dl > b.dl:
			return -1
		}
		return 0
	}
	if a.item.Urgency != b.item.Urgency {
		return int(a.item.Urgency) - int(b.item.Urgency)
	}
	return int(a.item.Impact) - int(b.item.Impact)
}

// pressing reports whether a queued item that cannot start justifies asking
// a running one to yield.
func pressing(e *entry, mode pickMode) bool {
	return mode != modeUrgency || e.item.Urgency == UrgencyCritical
}

// Preempt names a running item to yield its slot to a more urgent queued one
// that cannot start, or false when none should. It is cooperative (11.3):
// the victim keeps its slot (state preempting) until the runtime calls
// Release after the checkpoint. One preemption is in flight at a time.
//
// Candidates are each Group's next item when it is pressing and has no free
// slot it could take; the Group with the smallest virtual time goes first.
// The victim is the lowest-ranked preemptible running item that ranks below
// the candidate, from the candidate's own Group, or from a Group that stays at
// or above its fair share of slots when the candidate's Group is below its
// own and behind it in virtual time (so preemption never moves slots against
// fairness).
func (s *Scheduler) Preempt(now time.Time) (PreemptRequest, bool) {
	if s.offline || s.preempting > 0 {
		return PreemptRequest{}, false
	}
	t := ms(now)
	s.settle(t)
	var bestG *group
	var bestC, bestV *entry
	for _, g := range s.order {
		if g.eligible() == 0 {
			continue
		}
		c, mode := g.pick(t, s.slackMs, s.burst)
		if !pressing(c, mode) {
			continue
		}
		underQuota := g.running < g.quota
		if underQuota && s.free > 0 && s.fitSlot(c) >= 0 {
			continue // Next starts it; nothing to preempt
		}
		if mode == modeEDF && c.latest() >= s.nextRelease(c) {
			continue // its deadline survives waiting for a slot to free
		}
		v := s.victim(g, c, t, underQuota)
		if v == nil {
			continue
		}
		if bestG == nil || vtLess(g, bestG) {
			bestG, bestC, bestV = g, c, v
		}
	}
	if bestV == nil {
		return PreemptRequest{}, false
	}
	bestV.state = StatePreempting
	sl := &s.slots[bestV.slot]
	sl.preemptFor, sl.preemptForSeq = bestC, bestC.seq
	s.preempting++
	rules := RuleFairShare | RulePreemptLowestPriority
	if bestV.g != bestG {
		rules |= RulePreemptFairShareFloor
	}
	return PreemptRequest{
		Item: bestV.item.ID, Group: bestV.g.id, Slot: int(bestV.slot), For: bestC.item.ID,
		Basis: s.basis(bestC, rules, t),
	}, true
}

// RefusePreempt records that a victim did not reach a safe point within
// the runtime's patience and keeps its slot: active work is never
// interrupted at an unsafe point (11.3). The victim is running again and is
// not named a victim again during this run; the item it was asked for
// stays queued, takes the next slot that frees (no handoff), and the next
// preemption may be named.
func (s *Scheduler) RefusePreempt(id string) error {
	e := s.items.get(id)
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	if e.state != StatePreempting {
		return fmt.Errorf("%w: %q is %s, not preempting", ErrWrongState, id, e.state)
	}
	e.state, e.refused = StateRunning, true
	s.slots[e.slot].preemptFor = nil
	s.preempting--
	s.refusals++
	return nil
}

// Refusals counts the preemptions refused since the scheduler was made.
func (s *Scheduler) Refusals() uint64 { return s.refusals }

// nextRelease is when the first running item that could make room for c is
// expected to end.
func (s *Scheduler) nextRelease(c *entry) int64 {
	r := int64(math.MaxInt64)
	for i := range s.slots {
		if e := s.slots[i].e; e != nil && s.slots[i].res.Fits(c.item.Resources) {
			r = min(r, e.startMs+e.est)
		}
	}
	return r
}

func (s *Scheduler) victim(g *group, c *entry, now int64, underQuota bool) *entry {
	slots := int64(s.cfg.Slots)
	gBelow := int64(g.running)*s.activeWeight < slots*g.weight
	var best *entry
	for i := range s.slots {
		v := s.slots[i].e
		// An item that started only after its aging bound was starved once
		// already: it runs to its end, so repeated preemption cannot starve it.
		if v == nil || v.state != StateRunning || !v.item.Preemptible || v.refused || v.startMs >= v.ta ||
			now-v.startMs < s.minRunMs || !s.slots[i].res.Fits(c.item.Resources) {
			continue
		}
		if s.prioCmp(c, v, now) <= 0 {
			continue
		}
		if v.g != g {
			// Across Groups only towards fairness: the candidate's Group is
			// behind the victim's in virtual time and below its share of
			// slots, and the victim's keeps at least its whole-slot share.
			h := v.g
			if !underQuota || !gBelow || !vtLess(g, h) || int64(h.running-1) < slots*h.weight/s.activeWeight {
				continue
			}
		}
		// Lowest priority; then the latest start (least sunk into this run).
		if best == nil {
			best = v
		} else if c := s.prioCmp(v, best, now); c < 0 || (c == 0 && v.startMs > best.startMs) {
			best = v
		}
	}
	return best
}
