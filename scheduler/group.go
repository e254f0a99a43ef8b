package scheduler

import (
	"math"
	"math/bits"
)

// entry is the scheduler's record of one item. The fields a pick reads and
// writes come first and the item's cold ones (group, deadline, estimate) sit
// in its middle, so a pick touches fewer of the entry's cache lines. It is
// 256 bytes, a size class whose objects start on a cache line: 4 lines, not
// the 5 that a 288-byte entry straddles every other time.
type entry struct {
	g     *group
	seq   uint64 // arrival order; the final tie-break everywhere
	enqMs int64  // first enqueue; kept across preemption so age is never reset
	ta    int64  // aging key: enqMs + MaxWait(urgency, impact)
	dl    int64  // deadline in ms, or math.MaxInt64
	est   int64  // expected slot-ms of the next run
	// gen goes up each time the entry leaves the eligible set, which kills
	// its heap nodes (heap.go); it survives the slot's reuse.
	gen    uint32
	self   int32  // its slot in the slab
	idHash uint32 // its id's hash in the item index
	edf    bool   // its deadline node is in the EDF heap, not the latest-start one
	state  State
	block  Blockers
	// refused: the current run did not reach a safe point when asked
	// (RefusePreempt); it is not named as a victim again until it stops.
	refused bool
	slot    int32 // -1 unless running

	startMs    int64 // start of the current run
	charged    int64 // service charged to the Group for the current run
	ranMs      int64 // slot-time of earlier runs (preempted)
	firstStart int64 // -1 until first start

	item Item
}

func (e *entry) latest() int64 { return e.dl - e.est }

func (e *entry) hasDeadline() bool { return e.dl != math.MaxInt64 }

// group is one Group's queue and fair-share account.
type group struct {
	id       string
	weight   int64 // effective: class multiplier × configured weight
	quota    int   // max concurrent slots; ≥ 1
	quotaSet bool

	// svc is slot-ms charged: finished runs at their actual length, running
	// ones at max(elapsed, estimate). Virtual time is svc / weight.
	svc int64

	heaps   [heapKinds]entryHeap
	blocked int // queued but ineligible
	running int
	// Preemptions in flight across Groups: gain counts those for this
	// Group's items, loss those of its running items. Fair-share and quota
	// checks count them as done, so that several at once never take a
	// Group past its share or another below its own.
	gain, loss int
	hpos       int // index in the ready heap, -1 when not ready
	// svc, weight and the next item's estimate as of the last heap
	// placement: refresh skips the fix when none moved.
	keySvc, keyWeight, keyEst int64
	keyVT, keyVF              float64
	active                    bool

	edfStreak int // consecutive EDF picks taken while an overdue item waited

	obsMean  int64 // mean observed run length (ms) of finished items
	obsCount int64
}

func newGroup(id string, ents *slab) *group {
	g := &group{id: id, hpos: -1}
	for k := range g.heaps {
		g.heaps[k].ents = ents
	}
	return g
}

func (g *group) eligible() int { return g.heaps[byAging].live }

// nextEst is the estimate of the Group's next item in aging order: the item
// it starts unless a deadline or the starvation guard goes first.
func (g *group) nextEst() int64 {
	if n := g.heaps[byAging].topNode(); n != nil {
		return n.est
	}
	return 0
}

// setKey records the heap key: svc, weight and the next estimate, with the
// virtual start and finish times as floats so that heap moves compare one
// number.
func (g *group) setKey() { g.setKeyEst(g.nextEst()) }

func (g *group) setKeyEst(est int64) {
	g.keySvc, g.keyWeight, g.keyEst = g.svc, g.weight, est
	g.keyVT = float64(g.svc) / float64(g.weight)
	g.keyVF = float64(g.svc+g.keyEst) / float64(g.weight)
}

// keyLess orders ready Groups by virtual start time svc/w, then virtual
// finish time (svc + next estimate)/w, then id. Start times tie whenever a
// round of picks lines the Groups up (backlogged Groups with like runs do at
// every round); taking the earliest finish first then serves the heavy
// Groups at the round's start instead of at its end, which keeps every
// Group's lag behind its weighted share within one run (fairness_test.go).
// Each float decides unless it ties; then the exact comparison does.
func keyLess(a, b *group) bool {
	if a.keyVT != b.keyVT {
		return a.keyVT < b.keyVT
	}
	if c := vtCmp(a.keySvc, a.keyWeight, b.keySvc, b.keyWeight); c != 0 {
		return c < 0
	}
	if a.keyVF != b.keyVF {
		return a.keyVF < b.keyVF
	}
	if c := vtCmp(a.keySvc+a.keyEst, a.keyWeight, b.keySvc+b.keyEst, b.keyWeight); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

// vtLess orders Groups by svc/weight exactly (128-bit cross products).
func vtLess(a, b *group) bool {
	if c := vtCmp(a.svc, a.weight, b.svc, b.weight); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func vtCmp(s1, w1, s2, w2 int64) int {
	h1, l1 := bits.Mul64(uint64(s1), uint64(w2))
	h2, l2 := bits.Mul64(uint64(s2), uint64(w1))
	switch {
	case h1 != h2:
		if h1 < h2 {
			return -1
		}
		return 1
	case l1 != l2:
		if l1 < l2 {
			return -1
		}
		return 1
	}
	return 0
}

// ceilMulDiv returns ceil(a*b/c) for non-negative a, b and positive c.
func ceilMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64 / 2 // beyond any reachable service; avoids the Div64 panic
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}

// addEligible pushes e's nodes under its current generation, which no node
// carries yet.
func (g *group) addEligible(e *entry) {
	e.edf = false
	g.heaps[byAging].push(e, e.ta)
	if e.hasDeadline() {
		g.heaps[byLatest].push(e, e.latest())
	}
}

// removeEligible makes e's nodes dead; they leave the heaps lazily. Every
// 2^31 generations of a slot it reports that all dead nodes must go (see
// Scheduler.leave): a node of the slot 2^32 generations old would pass for live.
func (g *group) removeEligible(e *entry) (sweep bool) {
	e.gen++
	g.heaps[byAging].remove(e)
	switch {
	case !e.hasDeadline():
	case e.edf:
		g.heaps[byDeadline].remove(e)
	default:
		g.heaps[byLatest].remove(e)
	}
	return e.gen&(1<<31-1) == 0
}

// pickMode says which within-Group rule chose an item.
type pickMode uint8

const (
	modeUrgency pickMode = iota // smallest aging key, not yet overdue
	modeAging                   // smallest aging key, overdue
	modeEDF                     // deadline slack is short: earliest deadline first
	modeGuard                   // overdue item taken after EDFBurst EDF picks
	modeHandoff                 // the slot a preemption freed for this item
)

// promote moves deadline items whose slack has shrunk to the window (latest
// start ≤ now + window) into the EDF heap. Each item moves once, so the
// cost is amortized O(log n); time only moves forward, so none moves back.
func (g *group) promote(now, window int64) {
	h := &g.heaps[byLatest]
	if len(h.a) == 0 || h.a[0].key > now+window {
		return // no node is due, dead or live: reading no entry
	}
	for n := h.topNode(); n != nil && n.key <= now+window; n = h.topNode() {
		l := h.entry(n)
		g.heaps[byLatest].pop()
		l.edf = true
		g.heaps[byDeadline].push(l, l.dl)
	}
}

// pick returns the item this Group would start next, without removing it.
//
// Items whose deadline slack is inside the window go first, earliest deadline
// first. The rest go by aging key ta = enqueue + MaxWait(urgency, impact): a
// key fixed while the item waits, so urgency orders the queue and age
// overtakes urgency without any rescan. An item past its aging key is
// overdue; once EDFBurst deadline picks have passed over it, it goes next,
// which bounds every wait (doc.go).
func (g *group) pick(now, window int64, burst int) (*entry, pickMode) {
	g.promote(now, window)
	an := g.heaps[byAging].topNode()
	if an == nil {
		return nil, modeUrgency
	}
	a, overdue := g.heaps[byAging].entry(an), an.key <= now
	d := g.heaps[byDeadline].top()
	switch {
	case d == nil && overdue:
		return a, modeAging
	case d == nil:
		return a, modeUrgency
	case d != a && overdue && g.edfStreak >= burst:
		return a, modeGuard
	}
	return d, modeEDF
}

// commit records the pick for the anti-starvation guard.
func (g *group) commit(e *entry, mode pickMode, now int64) {
	if mode == modeHandoff {
		return
	}
	if mode == modeEDF {
		if a := g.heaps[byAging].topNode(); a != nil && a.ref != e.self && a.key <= now {
			g.edfStreak++
			return
		}
	}
	g.edfStreak = 0
}

// observe folds a finished item's slot-time into the Group's mean.
func (g *group) observe(ms int64) {
	g.obsCount++
	if g.obsCount == 1 {
		g.obsMean = ms
		return
	}
	// Exponential average, 1/8 weight: follows drift, ignores one outlier.
	g.obsMean += (ms - g.obsMean) / 8
}
