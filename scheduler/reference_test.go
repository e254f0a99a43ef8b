package scheduler

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The heaps are an index: every pick they give must be the one a plain scan
// over all items gives by the same rules. TestPropertyPicksMatchScan drives
// random operation sequences and checks each pick, and each Group's counts
// and ready-heap membership, against scanPick.

// scanGroupLess orders ready Groups as keyLess does, from the Groups' state
// and the next item found by scan, exactly (no floats).
func scanGroupLess(a *group, aNext *entry, b *group, bNext *entry) bool {
	if c := vtCmp(a.svc, a.weight, b.svc, b.weight); c != 0 {
		return c < 0
	}
	if c := vtCmp(a.svc+aNext.est, a.weight, b.svc+bNext.est, b.weight); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func agingLess(x, y *entry) bool { return x.ta < y.ta || (x.ta == y.ta && x.seq < y.seq) }

func edfLess(x, y *entry) bool { return x.dl < y.dl || (x.dl == y.dl && x.seq < y.seq) }

// scanPick is Next's choice (without a pending handoff) by linear scans:
// the ready Group by virtual start, finish, id; within it, deadline items
// whose slack is inside the window by deadline, else aging order, with the
// starvation guard after EDFBurst deadline picks.
func scanPick(s *Scheduler, now int64) (*group, *entry, pickMode) {
	queued := map[*group][]*entry{}
	s.items.each(func(e *entry) {
		if e.state == StateQueued {
			queued[e.g] = append(queued[e.g], e)
		}
	})
	var best *group
	var bestNext *entry
	for _, g := range s.order {
		es := queued[g]
		if len(es) == 0 || (g.quotaSet && g.running >= g.quota) {
			continue
		}
		next := es[0]
		for _, e := range es[1:] {
			if agingLess(e, next) {
				next = e
			}
		}
		if best == nil || scanGroupLess(g, next, best, bestNext) {
			best, bestNext = g, next
		}
	}
	if best == nil {
		return nil, nil, 0
	}
	a := bestNext
	var d *entry
	for _, e := range queued[best] {
		if e.hasDeadline() && e.latest() <= now+s.slackMs && (d == nil || edfLess(e, d)) {
			d = e
		}
	}
	overdue := a.ta <= now
	switch {
	case d == nil && overdue:
		return best, a, modeAging
	case d == nil:
		return best, a, modeUrgency
	case d != a && overdue && best.edfStreak >= s.burst:
		return best, a, modeGuard
	}
	return best, d, modeEDF
}

// checkIndex compares each Group's counts and ready-heap membership with a
// scan.
func checkIndex(t *rapid.T, s *Scheduler) {
	eligible := map[*group]int{}
	s.items.each(func(e *entry) {
		if e.state == StateQueued {
			eligible[e.g]++
		}
	})
	for _, g := range s.order {
		if g.eligible() != eligible[g] {
			t.Fatalf("group %s: %d eligible in the index, %d by scan", g.id, g.eligible(), eligible[g])
		}
		ready := eligible[g] > 0 && (!g.quotaSet || g.running < g.quota)
		if (g.hpos >= 0) != ready {
			t.Fatalf("group %s: in ready heap %v, ready by scan %v", g.id, g.hpos >= 0, ready)
		}
	}
}

func TestPropertyPicksMatchScan(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		slots := rapid.IntRange(1, 4).Draw(t, "slots")
		s, err := New(Config{Slots: slots, EDFBurst: rapid.IntRange(-1, 3).Draw(t, "burst"),
			SlackWindow: time.Duration(rapid.IntRange(1, 300).Draw(t, "slackMs")) * time.Millisecond,
			MaxWait:     [4]time.Duration{400 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		ng := rapid.IntRange(1, 4).Draw(t, "groups")
		groups := make([]string, ng)
		setGroup := func(g int) {
			gc := GroupConfig{Weight: rapid.Int64Range(1, 6).Draw(t, "weight"), Class: PriorityClass(rapid.IntRange(0, 3).Draw(t, "class"))}
			if rapid.Bool().Draw(t, "hasQuota") {
				gc.Quota = rapid.IntRange(1, slots).Draw(t, "quota")
			}
			if err := s.SetGroup(groups[g], gc); err != nil {
				t.Fatal(err)
			}
		}
		for g := range groups {
			groups[g] = fmt.Sprintf("g%d", g)
			setGroup(g)
		}
		now, n := int64(0), 0
		var ids []string // every item ever enqueued; finished ones are skipped
		randomItem := func(state ...State) (string, bool) {
			var pool []string
			for _, id := range ids {
				if e := s.items.get(id); e != nil {
					for _, st := range state {
						if e.state == st {
							pool = append(pool, id)
						}
					}
				}
			}
			if len(pool) == 0 {
				return "", false
			}
			return rapid.SampledFrom(pool).Draw(t, "item"), true
		}
		randomGates := func() Gates {
			if rapid.IntRange(0, 5).Draw(t, "gated") > 0 {
				return Gates{}
			}
			return Gates{DependenciesPending: rapid.Bool().Draw(t, "dep"), ApprovalRequired: true, ApprovalGranted: rapid.Bool().Draw(t, "granted")}
		}
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for range steps {
			at := time.UnixMilli(now)
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); op {
			case 0, 1, 2: // enqueue
				n++
				it := Item{ID: fmt.Sprintf("i%d", n), Group: groups[rapid.IntRange(0, ng-1).Draw(t, "group")],
					Urgency: Urgency(rapid.IntRange(0, 3).Draw(t, "urgency")), Impact: Impact(rapid.IntRange(0, 3).Draw(t, "impact")),
					Estimate:    time.Duration(rapid.IntRange(0, 300).Draw(t, "estimate")) * time.Millisecond,
					Preemptible: rapid.Bool().Draw(t, "preemptible"), Gates: randomGates()}
				if rapid.Bool().Draw(t, "hasDeadline") {
					it.Deadline = time.UnixMilli(now + rapid.Int64Range(0, 1500).Draw(t, "slack"))
				}
				if err := s.Enqueue(it, at); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, it.ID)
			case 3, 4: // next, checked against the scan
				check := s.handoffs == 0 && !s.offline && s.free > 0
				var wantG *group
				var wantE *entry
				var wantMode pickMode
				if check {
					s.settle(now)
					if wantE = scanPromised(s); wantE != nil {
						wantG, wantMode = wantE.g, modeHandoff
					} else {
						wantG, wantE, wantMode = scanPick(s, now)
						if wantE != nil {
							// A pressing item Preempt would name a victim
							// for once the pick ran takes the slot instead.
							if ch, _ := s.ahead(wantE, wantMode, now); ch.c != nil {
								wantG, wantE, wantMode = ch.c.g, ch.c, ch.mode
							}
						}
					}
				}
				d, ok := s.Next(at)
				if !check {
					break
				}
				if ok != (wantE != nil) {
					t.Fatalf("at %d: Next started %v, scan finds %v", now, ok, wantE != nil)
				}
				if ok && (d.Group != wantG.id || d.Item != wantE.item.ID) {
					t.Fatalf("at %d: Next picked %s/%s, scan picks %s/%s (mode %d)", now, d.Group, d.Item, wantG.id, wantE.item.ID, wantMode)
				}
			case 5: // finish or release a running item
				if id, ok := randomItem(StateRunning, StatePreempting); ok {
					if rapid.Bool().Draw(t, "finish") {
						err = s.Finish(id, at)
					} else {
						err = s.Release(id, at)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			case 6: // update any item
				if id, ok := randomItem(StateQueued, StateBlocked, StateRunning, StatePreempting); ok {
					u := Urgency(rapid.IntRange(0, 3).Draw(t, "urgency"))
					dl := time.UnixMilli(now + rapid.Int64Range(0, 1500).Draw(t, "slack"))
					es := time.Duration(rapid.IntRange(0, 300).Draw(t, "estimate")) * time.Millisecond
					g := randomGates()
					if err := s.Update(id, Change{Urgency: &u, Deadline: &dl, Estimate: &es, Gates: &g}, at); err != nil {
						t.Fatal(err)
					}
				}
			case 7: // remove a waiting item
				if id, ok := randomItem(StateQueued, StateBlocked); ok {
					if err := s.Remove(id); err != nil {
						t.Fatal(err)
					}
				}
			case 8: // preempt, or reconfigure a Group
				if rapid.Bool().Draw(t, "preempt") {
					if p, ok := s.Preempt(at); ok {
						checkNoFreeSlotFor(t, s, p)
					}
				} else {
					setGroup(rapid.IntRange(0, ng-1).Draw(t, "group"))
				}
			case 9:
				now += rapid.Int64Range(0, 200).Draw(t, "advance")
			}
			checkIndex(t, s)
			checkPromises(t, s, now)
		}
	})
}

// scanPromised is the item Next starts ahead of the common pick when no
// reserved slot waits: the first in slot order that a preemption in flight
// is for, under its quota, that a free slot fits.
func scanPromised(s *Scheduler) *entry {
	for i := range s.slots {
		c := s.slots[i].preemptFor
		if s.slots[i].e == nil || c == nil || c.g.running >= c.g.quota {
			continue
		}
		for j := range s.slots {
			if s.slots[j].e == nil && s.slots[j].res.Fits(c.item.Resources) {
				return c
			}
		}
	}
	return nil
}

// checkPromises: every preemption in flight, and every slot a finished one
// reserved, is for a distinct waiting urgent item (so there are never more
// victims than waiting urgent items that need them), and the counts the
// scheduler keeps (in flight, reserved, each Group's gain and loss) match
// the slots.
func checkPromises(t *rapid.T, s *Scheduler, now int64) {
	inFlight, reserved := 0, 0
	gain, loss := map[*group]int{}, map[*group]int{}
	seen := map[*entry]bool{}
	for i := range s.slots {
		sl := &s.slots[i]
		v, c := sl.e, sl.preemptFor
		if (v != nil && v.state == StatePreempting) != (v != nil && c != nil) {
			t.Fatalf("slot %d: victim state %v with promise %v", i, v.state, c != nil)
		}
		if c == nil {
			continue
		}
		if v == nil {
			reserved++
		} else {
			inFlight++
			if v.g != c.g {
				gain[c.g]++
				loss[v.g]++
			}
		}
		if c.seq != sl.preemptForSeq || c.state != StateQueued {
			t.Fatalf("slot %d is promised to %q, which is %v, not waiting", i, c.item.ID, c.state)
		}
		if !s.urgent(c, now) {
			t.Fatalf("slot %d is promised to %q, which is not urgent (%v)", i, c.item.ID, c.item.Urgency)
		}
		if seen[c] {
			t.Fatalf("two slots promised to %q", c.item.ID)
		}
		seen[c] = true
	}
	yieldable := 0
	for i := range s.slots {
		if e := s.slots[i].e; e != nil && e.item.Preemptible {
			yieldable++
		}
	}
	if yieldable != s.yieldable {
		t.Fatalf("%d preemptible runs by scan, the scheduler counts %d", yieldable, s.yieldable)
	}
	if inFlight != s.preempting || reserved != s.handoffs {
		t.Fatalf("%d in flight and %d reserved by scan, the scheduler counts %d and %d", inFlight, reserved, s.preempting, s.handoffs)
	}
	for _, g := range s.order {
		if g.gain != gain[g] || g.loss != loss[g] {
			t.Fatalf("group %s: gain %d loss %d, by scan %d and %d", g.id, g.gain, g.loss, gain[g], loss[g])
		}
	}
}

// checkNoFreeSlotFor: no run is preempted for an item that a free slot
// could take.
func checkNoFreeSlotFor(t *rapid.T, s *Scheduler, p PreemptRequest) {
	c := s.items.get(p.For)
	if c.g.running >= c.g.quota {
		return
	}
	for i := range s.slots {
		if sl := &s.slots[i]; sl.e == nil && sl.res.Fits(c.item.Resources) {
			t.Fatalf("%q preempted for %q while slot %d was free", p.Item, p.For, i)
		}
	}
}

// Removing most of a Group's queue, top or not, keeps each heap within
// twice its live nodes (compaction) and the picks still those of the scan.
func TestLazyHeapsCompact(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroup("g", GroupConfig{Weight: 1}); err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := range n {
		it := Item{ID: fmt.Sprintf("i%d", i), Group: "g", Urgency: Urgency(i % 4), Estimate: time.Millisecond}
		if i%2 == 0 {
			it.Deadline = time.UnixMilli(int64(10_000 + i*7%n))
		}
		if err := s.Enqueue(it, time.UnixMilli(0)); err != nil {
			t.Fatal(err)
		}
	}
	g := s.groups["g"]
	for i := range n - 50 {
		if err := s.Remove(fmt.Sprintf("i%d", (i*37)%n)); err != nil {
			t.Fatal(err)
		}
		for k := range g.heaps {
			if h := &g.heaps[k]; len(h.a) > 2*h.live+32 {
				t.Fatalf("heap %d holds %d nodes for %d live", k, len(h.a), h.live)
			}
		}
	}
	for now := int64(0); ; now++ {
		_, want, _ := scanPick(s, now)
		d, ok := s.Next(time.UnixMilli(now))
		if !ok {
			if want != nil {
				t.Fatalf("at %d: nothing started, scan picks %s", now, want.item.ID)
			}
			break
		}
		if d.Item != want.item.ID {
			t.Fatalf("at %d: Next picked %s, scan picks %s", now, d.Item, want.item.ID)
		}
		if err := s.Finish(d.Item, time.UnixMilli(now+1)); err != nil {
			t.Fatal(err)
		}
	}
	if q, r := s.Len(); q != 0 || r != 0 {
		t.Fatalf("left %d queued, %d running", q, r)
	}
}
