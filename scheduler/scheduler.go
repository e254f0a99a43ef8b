package scheduler

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"time"
)

// Config is fixed for the life of a Scheduler.
type Config struct {
	Slots int // execution slots (the Agent Card's maxConcurrency); ≥ 1
	// SlotResources, when set, has one entry per slot; otherwise every slot
	// takes any item.
	SlotResources []Resources
	// MaxWait is the aging bound per Urgency: an item that has waited this
	// long is overdue and goes ahead of everything its Group has queued later.
	// Zero entries take DefaultMaxWait.
	MaxWait [4]time.Duration
	// ImpactPercent scales MaxWait per Impact (percent); zero entries take
	// DefaultImpactPercent.
	ImpactPercent [4]int64
	// EDFBurst is how many earliest-deadline picks a Group may make while one
	// of its items is overdue before that item goes. Zero takes 4; negative
	// means 0 (an overdue item always goes first).
	EDFBurst int
	// DefaultEstimate is the expected slot-time of an item with no estimate
	// in a Group with no finished item yet. Zero takes one minute.
	DefaultEstimate time.Duration
	// SlackWindow: an item whose latest start (deadline − estimate) is within
	// this window counts as at risk when choosing preemptions. Zero takes 30s.
	SlackWindow time.Duration
	// MinRun: a run younger than this is never preempted. Zero takes 1ms.
	MinRun time.Duration
}

// Defaults for Config's zero fields.
var (
	DefaultMaxWait = [4]time.Duration{
		UrgencyLow: 5 * time.Minute, UrgencyNormal: time.Minute,
		UrgencyHigh: 10 * time.Second, UrgencyCritical: time.Second,
	}
	DefaultImpactPercent = [4]int64{ImpactLow: 100, ImpactMedium: 80, ImpactHigh: 60, ImpactCritical: 40}
)

// GroupConfig sets a Group's share.
type GroupConfig struct {
	Weight int64         // ≥ 1; the Group's own weight
	Class  PriorityClass // organization priority class; multiplies Weight
	Quota  int           // max concurrent slots; 0 means no limit but the slot count
}

// maxWeight keeps svc×weight products far from overflow (svc < 2^43 ms).
const maxWeight = 1 << 20

type slot struct {
	res Resources
	e   *entry
	// The item a preemption promised this slot to: while e is preempting
	// (in flight), and once e has released it until the next pick hands it
	// over (reserved, e nil). It is kept here, not in the entry, to keep
	// entries at 256 bytes; seq tells whether the entry is still that item.
	preemptFor    *entry
	preemptForSeq uint64
	gainTo        *group // in flight across Groups: preemptFor's Group (group.gain)
}

// Scheduler is the global scheduler. It is not safe for concurrent use: one
// goroutine (the runtime's) owns it.
type Scheduler struct {
	cfg       Config
	maxWaitMs [4][4]int64
	burst     int
	defEst    int64
	slackMs   int64
	minRunMs  int64

	slots       []slot
	free        int
	freeMask    uint64 // bit i: slot i is free (the first 64 slots)
	homogeneous bool

	groups map[string]*group
	order  []*group // by id, for deterministic scans
	ready  groupHeap
	ents   slab
	items  index
	seq    uint64

	// System virtual time V = vNum/vDen: the smallest ready virtual time at
	// the latest pick, of the slot-time its Group's runs have used (earned).
	// A Group joining the ready set starts no lower.
	vNum, vDen int64
	// nowMs is the latest time an operation was given: when a Group joins,
	// the other Groups' runs have used their slots until then.
	nowMs int64

	// settleBy: until then no running item's charge can grow, so settle has
	// nothing to do (charges grow only once a run outlasts its charge).
	settleBy int64

	activeWeight int64 // Σ weight of Groups with eligible or running items
	offline      bool
	latMs        int64  // SetStartLatency
	preempting   int    // preemptions in flight: victims still holding their slot
	refusals     uint64 // preemptions refused (RefusePreempt)
	// handoffs counts free slots reserved for the item a finished
	// preemption freed them for (slot.preemptFor); the next pick gives each
	// its slot, so the victim's Group cannot take it back.
	handoffs int
	// yieldable counts running items that declare safe points: without
	// one no preemption can be named, and Next skips looking for one.
	yieldable int
}

// New returns an empty Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Slots < 1 {
		return nil, fmt.Errorf("%w: slots must be at least 1, got %d", ErrInvalid, cfg.Slots)
	}
	if cfg.SlotResources != nil && len(cfg.SlotResources) != cfg.Slots {
		return nil, fmt.Errorf("%w: %d slot resources for %d slots", ErrInvalid, len(cfg.SlotResources), cfg.Slots)
	}
	s := &Scheduler{cfg: cfg, groups: map[string]*group{}, vDen: 1, homogeneous: true}
	s.items = newIndex(&s.ents)
	for u := range 4 {
		mw := cfg.MaxWait[u]
		if mw == 0 {
			mw = DefaultMaxWait[u]
		}
		if mw < 0 {
			return nil, fmt.Errorf("%w: negative max wait", ErrInvalid)
		}
		for i := range 4 {
			p := cfg.ImpactPercent[i]
			if p == 0 {
				p = DefaultImpactPercent[i]
			}
			if p < 0 || p > 100 {
				return nil, fmt.Errorf("%w: impact percent %d outside 0..100", ErrInvalid, p)
			}
			s.maxWaitMs[u][i] = mw.Milliseconds() * p / 100
		}
	}
	s.burst = cfg.EDFBurst
	if s.burst == 0 {
		s.burst = 4
	} else if s.burst < 0 {
		s.burst = 0
	}
	s.defEst = positiveMs(cfg.DefaultEstimate, time.Minute)
	s.slackMs = positiveMs(cfg.SlackWindow, 30*time.Second)
	s.minRunMs = positiveMs(cfg.MinRun, time.Millisecond)
	s.slots = make([]slot, cfg.Slots)
	for i := range s.slots {
		if cfg.SlotResources != nil {
			s.slots[i].res = cfg.SlotResources[i]
			if s.slots[i].res != s.slots[0].res {
				s.homogeneous = false
			}
		}
	}
	s.free = cfg.Slots
	s.freeMask = ^uint64(0) >> (64 - min(cfg.Slots, 64))
	return s, nil
}

func positiveMs(d, def time.Duration) int64 {
	if d <= 0 {
		d = def
	}
	return max(d.Milliseconds(), 1)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func wall(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// SetGroup adds a Group or changes its weight, class or quota.
func (s *Scheduler) SetGroup(id string, gc GroupConfig) error {
	if id == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalid)
	}
	if gc.Weight < 1 || gc.Weight > maxWeight/8 {
		return fmt.Errorf("%w: group %q weight %d outside 1..%d", ErrInvalid, id, gc.Weight, maxWeight/8)
	}
	if int(gc.Class) >= len(classMultiplier) {
		return fmt.Errorf("%w: group %q priority class %d", ErrInvalid, id, gc.Class)
	}
	if gc.Quota < 0 {
		return fmt.Errorf("%w: group %q quota %d", ErrInvalid, id, gc.Quota)
	}
	g, ok := s.groups[id]
	if !ok {
		g = newGroup(id, &s.ents)
		s.groups[id] = g
		i := sort.Search(len(s.order), func(i int) bool { return s.order[i].id >= id })
		s.order = append(s.order, nil)
		copy(s.order[i+1:], s.order[i:])
		s.order[i] = g
	}
	if g.active {
		s.activeWeight -= g.weight
	}
	g.weight = gc.Weight * classMultiplier[gc.Class]
	s.ready.noteWeight(g.weight)
	if g.active {
		s.activeWeight += g.weight
	}
	g.quotaSet = gc.Quota > 0
	g.quota = s.cfg.Slots
	if g.quotaSet {
		g.quota = min(gc.Quota, s.cfg.Slots)
	}
	s.refresh(g)
	return nil
}

// Enqueue adds an accepted item to its Group queue.
func (s *Scheduler) Enqueue(it Item, now time.Time) error {
	if it.ID == "" {
		return fmt.Errorf("%w: empty item id", ErrInvalid)
	}
	g, ok := s.groups[it.Group]
	if !ok {
		return fmt.Errorf("%w %q (item %q)", ErrUnknownGroup, it.Group, it.ID)
	}
	if it.Urgency > UrgencyCritical || it.Impact > ImpactCritical || it.Estimate < 0 {
		return fmt.Errorf("%w: item %q urgency, impact or estimate out of range", ErrInvalid, it.ID)
	}
	s.nowMs = max(s.nowMs, ms(now))
	e := s.ents.get()
	e.item, e.g, e.seq, e.enqMs, e.firstStart, e.slot = it, g, s.seq+1, ms(now), -1, -1
	if s.items.insert(e) != nil {
		s.ents.put(e)
		return fmt.Errorf("%w %q", ErrDuplicate, it.ID)
	}
	s.seq++
	s.rekey(e)
	s.queue(e)
	s.refresh(g)
	return nil
}

// rekey derives the heap keys from the item; enqMs stays, so age survives
// priority changes and preemption.
func (s *Scheduler) rekey(e *entry) {
	it := &e.item
	e.ta = e.enqMs + s.maxWaitMs[it.Urgency][it.Impact]
	e.dl = math.MaxInt64
	if !it.Deadline.IsZero() {
		e.dl = ms(it.Deadline)
	}
	switch {
	case it.Estimate > 0:
		e.est = max(it.Estimate.Milliseconds(), 1)
	default:
		e.est = s.groupEstimate(e.g)
	}
}

func (s *Scheduler) blockers(it *Item) Blockers {
	var b Blockers
	if it.Gates.DependenciesPending {
		b |= BlockedDependencies
	}
	if it.Gates.ApprovalRequired && !it.Gates.ApprovalGranted {
		b |= BlockedApproval
	}
	if it.Gates.OwnershipLost {
		b |= BlockedOwnership
	}
	fits := s.homogeneous && s.slots[0].res.Fits(it.Resources)
	for i := 0; !fits && !s.homogeneous && i < len(s.slots); i++ {
		fits = s.slots[i].res.Fits(it.Resources)
	}
	if !fits {
		b |= BlockedResources
	}
	return b
}

// queue puts a not-running entry where it belongs: a heap or the blocked set.
func (s *Scheduler) queue(e *entry) {
	e.block = s.blockers(&e.item)
	if e.block != 0 {
		e.state = StateBlocked
		e.g.blocked++
		return
	}
	e.state = StateQueued
	e.g.addEligible(e)
}

func (s *Scheduler) unqueue(e *entry) {
	switch e.state {
	case StateQueued:
		s.leave(e)
	case StateBlocked:
		e.g.blocked--
	}
}

// leave takes e out of the eligible set. Once in 2^31 generations of its
// slot every heap drops its dead nodes, so that none is left that a later
// wrap of the 32-bit generation could make look live.
func (s *Scheduler) leave(e *entry) {
	if e.g.removeEligible(e) {
		for _, g := range s.order {
			for k := range g.heaps {
				g.heaps[k].compact()
			}
		}
	}
}

// refresh re-derives a Group's ready and active membership after a change.
func (s *Scheduler) refresh(g *group) {
	active := g.eligible() > 0 || g.running > 0
	left := g.active && !active
	if active != g.active {
		if active {
			s.activeWeight += g.weight
		} else {
			s.activeWeight -= g.weight
		}
		g.active = active
	}
	// Without a quota of its own a Group is never out for holding slots:
	// when it holds them all there is no free slot to pick for anyway.
	ready := g.eligible() > 0 && (!g.quotaSet || g.running < g.quota)
	switch {
	case ready && g.hpos < 0:
		// Joining: no credit for time away. A Group back under its quota
		// keeps at most one quota's worth of runs of credit; an idle one none.
		floor := ceilMulDiv(s.vNum, g.weight, s.vDen)
		if g.running > 0 {
			floor -= int64(g.quota) * s.groupEstimate(g)
		}
		if g.svc < floor {
			g.svc = floor
		}
		s.ready.push(g)
	case !ready && g.hpos >= 0:
		s.ready.remove(g)
	case ready && (g.svc != g.keySvc || g.weight != g.keyWeight || g.nextEst() != g.keyEst):
		s.ready.fix(g.hpos)
	}
	if left {
		s.advance(g)
	}
}

// groupEstimate is the Group's expected run length.
func (s *Scheduler) groupEstimate(g *group) int64 {
	if g.obsCount > 0 {
		return max(g.obsMean, 1)
	}
	return s.defEst
}

// settle charges running items' elapsed slot-time to their Groups.
func (s *Scheduler) settle(now int64) {
	if 0 <= now && now <= s.settleBy {
		return
	}
	by := int64(math.MaxInt64)
	for i := range s.slots {
		e := s.slots[i].e
		if e == nil {
			continue
		}
		c := max(now-e.startMs, e.est)
		if c > e.charged {
			e.g.svc += c - e.charged
			e.charged = c
			if e.g.hpos >= 0 {
				s.ready.fix(e.g.hpos)
			}
		}
		by = min(by, chargedUntil(e))
	}
	s.settleBy = by
}

// chargedUntil is the last time at which e's run has not outlasted its
// charge (which is at least its estimate), or MinInt64 outside the range
// where that sum and settle's differences cannot overflow.
func chargedUntil(e *entry) int64 {
	const lim = 1 << 61
	if e.startMs < 0 || e.startMs > lim || e.charged > lim || e.charged < e.est {
		return math.MinInt64
	}
	return e.startMs + e.charged
}

// fitSlot returns the free slot for e: the lowest index when slots are alike,
// else the smallest that fits (best fit). -1 when none.
func (s *Scheduler) fitSlot(e *entry) int {
	if s.homogeneous && len(s.slots) <= 64 {
		if s.freeMask == 0 || !s.slots[0].res.Fits(e.item.Resources) {
			return -1
		}
		return bits.TrailingZeros64(s.freeMask) // no loop to mispredict
	}
	best := -1
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.e != nil || !sl.res.Fits(e.item.Resources) {
			continue
		}
		if s.homogeneous {
			return i
		}
		if best < 0 || smaller(sl.res, s.slots[best].res) {
			best = i
		}
	}
	return best
}

func smaller(a, b Resources) bool {
	if a.MilliCPU != b.MilliCPU {
		return a.MilliCPU != 0 && (b.MilliCPU == 0 || a.MilliCPU < b.MilliCPU)
	}
	return a.MemoryMiB != 0 && (b.MemoryMiB == 0 || a.MemoryMiB < b.MemoryMiB)
}

// Next picks the next item for a free slot, or false when nothing can start.
// The Group with the smallest virtual time goes; within it, pick's order.
func (s *Scheduler) Next(now time.Time) (Decision, bool) {
	if s.offline || s.free == 0 || (s.ready.top() == nil && s.handoffs == 0) {
		return Decision{}, false
	}
	t := ms(now)
	s.nowMs = max(s.nowMs, t)
	s.settle(t)
	if s.handoffs > 0 || s.preempting > 0 {
		if d, ok := s.nextPromised(t); ok {
			return d, true
		}
	}
	top := s.ready.top()
	if top == nil {
		return Decision{}, false
	}
	if svc := s.earned(top, t); vtCmp(svc, top.weight, s.vNum, s.vDen) > 0 {
		s.vNum, s.vDen = svc, top.weight
	}
	var skipped []*group
	var d Decision
	found := false
	for g := s.ready.top(); g != nil; g = s.ready.top() {
		e, mode := g.pick(t, s.slackMs, s.burst)
		if sl := s.fitSlot(e); sl >= 0 {
			if ch, csl := s.ahead(e, mode, t); ch.c != nil {
				// Given to e, the slot would cost a run a preemption.
				d = s.start(ch.c, csl, ch.mode, t)
				d.Basis.PolicyRulesApplied |= RulePreemptLowestPriority
			} else {
				d = s.start(e, sl, mode, t)
			}
			found = true
			break
		}
		// Only with unlike slots: this Group's next item needs a bigger
		// one. It keeps its place; no later item of its own overtakes it.
		s.ready.remove(g)
		skipped = append(skipped, g)
	}
	for _, g := range skipped {
		s.ready.push(g)
	}
	return d, found
}

// earned is g's service with each running item's charge replaced by the
// time it has run: what its runs have used of their slots by now. A
// charge is an estimate until its run ends, and one over the run's real
// length is given back then; V counts none of it, or a Group that joined
// meanwhile would keep it as a debt (two runs charged at a Group's 2.5 s
// mean that took 0.3 s gave a 4:2 Group half the slot-time until its own
// runs ended: TestJoinAtServiceNotEstimate).
func (s *Scheduler) earned(g *group, now int64) int64 {
	svc := g.svc
	if g.running == 0 {
		return svc
	}
	for i := range s.slots {
		if e := s.slots[i].e; e != nil && e.g == g {
			svc += max(now-e.startMs, 0) - e.charged
		}
	}
	return max(svc, 0)
}

// advance moves V up to the least earned virtual time of the Groups still
// active (the top ready one and those running items) when g stops being
// active, or to g's own when it was the last: V otherwise moves only at
// picks, and a Group that waited for its own runs to end, none of its
// items eligible, would join at a V from before them, keeping as credit
// what it did not use for want of work (a 4:2 Group's one long run beside
// another Group's gave it a run's worth of extra slot-time once both had
// work: TestJoinAtServiceNotEstimate). O(S).
func (s *Scheduler) advance(g *group) {
	lo, loSvc := g, g.svc
	found := false
	consider := func(h *group) {
		if h == g {
			return
		}
		if svc := s.earned(h, s.nowMs); !found || vtCmp(svc, h.weight, loSvc, lo.weight) < 0 {
			lo, loSvc, found = h, svc, true
		}
	}
	if top := s.ready.top(); top != nil {
		consider(top)
	}
	for i := range s.slots {
		if e := s.slots[i].e; e != nil {
			consider(e.g)
		}
	}
	if vtCmp(loSvc, lo.weight, s.vNum, s.vDen) > 0 {
		s.vNum, s.vDen = loSvc, lo.weight
	}
}

func (s *Scheduler) start(e *entry, sl int, mode pickMode, now int64) Decision {
	g := e.g
	s.withdraw(e)
	s.leave(e)
	g.commit(e, mode, now)
	e.state = StateRunning
	e.slot = int32(sl)
	e.startMs = now
	e.charged = e.est
	if e.firstStart < 0 {
		e.firstStart = now
	}
	g.svc += e.charged
	s.settleBy = min(s.settleBy, chargedUntil(e))
	g.running++
	if e.item.Preemptible {
		s.yieldable++
	}
	s.free--
	s.slots[sl].e = e
	s.freeMask &^= 1 << sl
	s.refresh(g)
	rules := RuleFairShare
	switch mode {
	case modeUrgency:
		rules |= RuleUrgencyOrder
	case modeAging:
		rules |= RuleAging
	case modeEDF:
		rules |= RuleDeadlineEDF
	case modeGuard:
		rules |= RuleStarvationGuard | RuleAging
	case modeHandoff:
		rules |= RulePreemptLowestPriority
	}
	return Decision{Item: e.item.ID, Group: g.id, Slot: sl, Basis: s.basis(e, rules, now)}
}

func (s *Scheduler) basis(e *entry, rules Rules, now int64) SelectionBasis {
	if e.g.quotaSet {
		rules |= RuleGroupQuota
	}
	if e.item.Gates.ApprovalRequired {
		rules |= RuleRiskGate
	}
	if e.item.Resources != (Resources{}) {
		rules |= RuleResourceFit
	}
	return SelectionBasis{
		CapabilityMatches:     e.item.Capabilities,
		AuthorizationEligible: e.block == 0,
		AvailabilityEstimate:  wall(now),
		ExpectedCost:          e.est,
		ReliabilityEvidence:   e.item.Evidence,
		PolicyRulesApplied:    rules,
	}
}

// Finish ends a running item: its slot is freed and its slot-time charged.
func (s *Scheduler) Finish(id string, now time.Time) error {
	e, err := s.stop(id, now)
	if err != nil {
		return err
	}
	g := e.g
	g.observe(e.ranMs)
	s.items.remove(e)
	s.ents.put(e)
	s.refresh(g)
	return nil
}

// Release frees a running item's slot and puts it back in its Group queue,
// keeping its age: the end of a cooperative preemption (after the
// checkpoint) or of a block.
func (s *Scheduler) Release(id string, now time.Time) error {
	e, err := s.stop(id, now)
	if err != nil {
		return err
	}
	s.queue(e)
	s.refresh(e.g)
	return nil
}

func (s *Scheduler) stop(id string, now time.Time) (*entry, error) {
	// The index, not a scan of the slots: its probe reads the line that
	// Finish's removal writes next, and no other item's id.
	s.nowMs = max(s.nowMs, ms(now))
	e := s.items.get(id)
	if e == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	if e.state != StateRunning && e.state != StatePreempting {
		return nil, fmt.Errorf("%w: %q is %s, not running", ErrWrongState, id, e.state)
	}
	// A clock stepped back since the start makes the run end before it
	// began: it ran for no time we can tell. Refusing would keep its slot
	// taken for good (the caller cannot stop it any other way).
	ran := max(ms(now)-e.startMs, 0)
	g := e.g
	g.svc += ran - e.charged // the charge becomes the actual slot-time
	e.charged = 0
	e.ranMs += ran
	if e.state == StatePreempting {
		// The promise moves from the victim to its freed slot: reserved
		// for the item until the next pick hands it over.
		sl := &s.slots[e.slot]
		c, seq := sl.preemptFor, sl.preemptForSeq
		s.endPromise(sl)
		if c != nil {
			sl.preemptFor, sl.preemptForSeq = c, seq
			s.handoffs++
		}
	}
	e.refused = false
	if e.item.Preemptible {
		s.yieldable--
	}
	s.slots[e.slot].e = nil
	s.freeMask |= 1 << e.slot
	e.slot = -1
	s.free++
	g.running--
	return e, nil
}

// Update changes a queued, blocked or running item. A queued item is
// re-keyed at once (priority changes reorder the queue immediately).
func (s *Scheduler) Update(id string, ch Change, now time.Time) error {
	s.nowMs = max(s.nowMs, ms(now))
	e := s.items.get(id)
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	it := e.item
	if ch.Urgency != nil {
		it.Urgency = *ch.Urgency
	}
	if ch.Impact != nil {
		it.Impact = *ch.Impact
	}
	if ch.Deadline != nil {
		it.Deadline = *ch.Deadline
	}
	if ch.Estimate != nil {
		it.Estimate = *ch.Estimate
	}
	if ch.Observed != nil {
		it.Observed = *ch.Observed
	}
	if ch.Preemptible != nil {
		it.Preemptible = *ch.Preemptible
	}
	if ch.Gates != nil {
		it.Gates = *ch.Gates
	}
	if it.Urgency > UrgencyCritical || it.Impact > ImpactCritical || it.Estimate < 0 {
		return fmt.Errorf("%w: item %q urgency, impact or estimate out of range", ErrInvalid, id)
	}
	waiting := e.state == StateQueued || e.state == StateBlocked
	if waiting {
		s.unqueue(e)
	} else if e.item.Preemptible != it.Preemptible {
		if it.Preemptible {
			s.yieldable++
		} else {
			s.yieldable--
		}
	}
	e.item = it
	s.rekey(e)
	if waiting {
		s.queue(e)
		if e.state != StateQueued || !s.urgent(e, ms(now)) {
			s.withdraw(e) // blocked or no longer pressing: no slot is kept for it
		}
	} else {
		e.block = s.blockers(&e.item)
		s.settleBy = math.MinInt64 // its estimate, and so its charge, may grow
	}
	s.refresh(e.g)
	return nil
}

// Remove drops a queued or blocked item (cancelled, reassigned, failed).
func (s *Scheduler) Remove(id string) error {
	e := s.items.get(id)
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownItem, id)
	}
	if e.state != StateQueued && e.state != StateBlocked {
		return fmt.Errorf("%w: %q is %s; finish or release it first", ErrWrongState, id, e.state)
	}
	s.unqueue(e)
	s.withdraw(e)
	g := e.g
	s.items.remove(e)
	s.ents.put(e)
	s.refresh(g)
	return nil
}

// SetOffline stops (true) or resumes (false) new starts: while disconnected
// from the authority no new WorkItem starts (docs/design.md §7).
func (s *Scheduler) SetOffline(offline bool) { s.offline = offline }

// SetStartLatency is how long a picked item takes to be running (the
// caller's observed round trip from a pick to its lease). Disclose adds it
// to every start window: a start is never instant.
func (s *Scheduler) SetStartLatency(d time.Duration) { s.latMs = max(d.Milliseconds(), 0) }

// Status is an item's current place.
type Status struct {
	State    State
	Blockers Blockers
	Slot     int // -1 unless running
	// PreemptRefused: the current run was asked to yield and did not
	// reach a safe point in time (RefusePreempt).
	PreemptRefused bool
}

// Status reports where an item is; false when unknown (finished or removed).
func (s *Scheduler) Status(id string) (Status, bool) {
	e := s.items.get(id)
	if e == nil {
		return Status{}, false
	}
	return Status{State: e.state, Blockers: e.block, Slot: int(e.slot), PreemptRefused: e.refused}, true
}

// Len returns the number of queued (eligible or blocked) and running items.
func (s *Scheduler) Len() (queued, running int) {
	return s.items.n - (s.cfg.Slots - s.free), s.cfg.Slots - s.free
}
