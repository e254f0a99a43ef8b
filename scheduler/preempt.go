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

// urgent reports whether a waiting item may have a slot promised to it:
// critical, overdue or racing its deadline (what pressing asks of a
// candidate, whichever rule of its Group's order reached it).
func (s *Scheduler) urgent(e *entry, now int64) bool {
	overdue, deadline := s.pressed(e, now)
	return overdue || deadline || e.item.Urgency == UrgencyCritical
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
// Release after the checkpoint. Call it until it returns false: each call
// names one victim for one more waiting item, so a burst of pressing items
// has its preemptions in flight together, one per item and never one for
// an item that already has a slot promised to it.
//
// Candidates are each Group's next item that no preemption is for yet,
// when it is pressing and has no free slot it could take; the Group with
// the smallest virtual time goes first. The victim is the lowest-ranked
// preemptible running item that ranks below the candidate, from the
// candidate's own Group, or from a Group that stays at or above its fair
// share of slots when the candidate's Group is below its own and behind it
// in virtual time (so preemption never moves slots against fairness); the
// preemptions already in flight count as done.
func (s *Scheduler) Preempt(now time.Time) (PreemptRequest, bool) {
	if s.offline {
		return PreemptRequest{}, false
	}
	t := ms(now)
	s.settle(t)
	ch := s.choose(t, true)
	c, v := ch.c, ch.v
	if v == nil {
		return PreemptRequest{}, false
	}
	s.promise(v, c)
	rules := RuleFairShare | RulePreemptLowestPriority
	if v.g != c.g {
		rules |= RulePreemptFairShareFloor
	}
	return PreemptRequest{
		Item: v.item.ID, Group: v.g.id, Slot: int(v.slot), For: c.item.ID,
		Basis: s.basis(c, rules, t),
	}, true
}

// choice is a candidate, how its Group's order reached it, and its victim.
type choice struct {
	c, v *entry
	mode pickMode
}

// choose returns the candidate a preemption is for and its victim, or a
// zero choice. Without skipFree it also looks at candidates a free slot
// could take (ahead asks about a slot that is being given away).
func (s *Scheduler) choose(t int64, skipFree bool) choice {
	var best choice
	for _, g := range s.order {
		if g.eligible() == 0 {
			continue
		}
		if best.c != nil && !vtLess(g, best.c.g) {
			continue // the Group of the smallest virtual time with a victim goes
		}
		c, mode := s.candidate(g, t)
		if c == nil || !pressing(c, mode) {
			continue
		}
		if skipFree && g.running < g.quota && s.free > 0 && s.fitSlot(c) >= 0 {
			continue // Next starts it; nothing to preempt
		}
		if mode == modeEDF && c.latest() >= s.nextRelease(c) {
			continue // its deadline survives waiting for a slot to free
		}
		v := s.victim(g, c, t, g.running+g.gain < g.quota)
		if v == nil {
			continue
		}
		best = choice{c, v, mode}
	}
	return best
}

// candidate is g's next item in pick order that no slot is promised to
// yet. The promised ones leave the heaps for the look and come back with
// the same keys, so the order is unchanged.
func (s *Scheduler) candidate(g *group, now int64) (*entry, pickMode) {
	c, mode := g.pick(now, s.slackMs, s.burst)
	if s.preempting == 0 && s.handoffs == 0 {
		return c, mode
	}
	var hidden []*entry
	for c != nil && s.promised(c) {
		s.leave(c)
		hidden = append(hidden, c)
		c, mode = g.pick(now, s.slackMs, s.burst)
	}
	for _, e := range hidden {
		g.addEligible(e)
	}
	return c, mode
}

// promised reports whether a slot is promised to c: a preemption in flight
// for it, or a slot its victim freed.
func (s *Scheduler) promised(c *entry) bool {
	for i := range s.slots {
		if sl := &s.slots[i]; sl.preemptFor == c && sl.preemptForSeq == c.seq {
			return true
		}
	}
	return false
}

// promise records a preemption in flight: v yields its slot to c.
func (s *Scheduler) promise(v, c *entry) {
	v.state = StatePreempting
	sl := &s.slots[v.slot]
	sl.preemptFor, sl.preemptForSeq = c, c.seq
	s.preempting++
	if v.g != c.g {
		sl.gainTo = c.g
		c.g.gain++
		v.g.loss++
	}
}

// endPromise ends the preemption in flight in sl, whose victim still holds
// it: the victim released it, refused, or the item no longer needs it.
func (s *Scheduler) endPromise(sl *slot) {
	s.preempting--
	if g := sl.gainTo; g != nil {
		g.gain--
		sl.e.g.loss--
	}
	sl.preemptFor, sl.gainTo = nil, nil
}

// withdraw drops what is promised to c, which starts or stops waiting: a
// reserved slot goes back to the common pick, and a preemption in flight
// for c is no longer needed, so its victim counts as running again (the
// runtime cannot take a request back: if the run reaches its safe point
// anyway, Release queues it as usual, and Preempt may name it for another
// item meanwhile).
func (s *Scheduler) withdraw(c *entry) {
	if s.preempting == 0 && s.handoffs == 0 {
		return
	}
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.preemptFor != c || sl.preemptForSeq != c.seq {
			continue
		}
		if sl.e == nil {
			sl.preemptFor = nil
			s.handoffs--
			continue
		}
		sl.e.state = StateRunning
		s.endPromise(sl)
	}
}

// ahead returns the pressing item that takes a free slot instead of e,
// the common pick, and the slot: one that Preempt would name a victim for
// once e ran. Serving it now preempts no run for it, and leaves the slots
// where that preemption would have put them (the victim runs on, e waits).
func (s *Scheduler) ahead(e *entry, mode pickMode, t int64) (choice, int) {
	if s.yieldable == 0 || pressing(e, mode) {
		return choice{}, -1
	}
	h := e.g
	h.svc += e.est // as start would charge it
	h.running++
	ch := s.choose(t, false)
	h.svc -= e.est
	h.running--
	if ch.c == nil || ch.c.g.running >= ch.c.g.quota {
		return choice{}, -1
	}
	sl := s.fitSlot(ch.c)
	if sl < 0 {
		return choice{}, -1
	}
	return ch, sl
}

// nextPromised starts an item a slot is promised to: first a reserved
// slot its victim freed (one whose item cannot take it goes back to the
// common pick), else any free slot it can take, which makes the preemption
// in flight for it needless (start withdraws it).
func (s *Scheduler) nextPromised(now int64) (Decision, bool) {
	for i := 0; s.handoffs > 0 && i < len(s.slots); i++ {
		sl := &s.slots[i]
		c := sl.preemptFor
		if sl.e != nil || c == nil {
			continue
		}
		live := c.seq == sl.preemptForSeq
		sl.preemptFor = nil
		s.handoffs--
		if live && c.state == StateQueued && c.g.running < c.g.quota && sl.res.Fits(c.item.Resources) {
			return s.start(c, i, modeHandoff, now), true
		}
	}
	for i := 0; s.preempting > 0 && i < len(s.slots); i++ {
		c := s.slots[i].preemptFor
		if s.slots[i].e == nil || c == nil || c.seq != s.slots[i].preemptForSeq || c.g.running >= c.g.quota {
			continue
		}
		if f := s.fitSlot(c); f >= 0 {
			return s.start(c, f, modeHandoff, now), true
		}
	}
	return Decision{}, false
}

// RefusePreempt records that a victim did not reach a safe point within
// the runtime's patience and keeps its slot: active work is never
// interrupted at an unsafe point (11.3). The victim is running again and is
// not named a victim again during this run; the item it was asked for
// stays queued, takes the next slot that frees (no handoff), and may have
// another victim named.
func (s *Scheduler) RefusePreempt(id string) error {
	e := s.items.get(id)
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	if e.state != StatePreempting {
		return fmt.Errorf("%w: %q is %s, not preempting", ErrWrongState, id, e.state)
	}
	e.state, e.refused = StateRunning, true
	s.endPromise(&s.slots[e.slot])
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
	gBelow := int64(g.running+g.gain)*s.activeWeight < slots*g.weight
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
			// slots, and the victim's keeps at least its whole-slot share,
			// the preemptions in flight counted as done.
			h := v.g
			if !underQuota || !gBelow || !vtLess(g, h) || int64(h.running-h.loss-1) < slots*h.weight/s.activeWeight {
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
