package runtime

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
)

// itemKey names a WorkItem; ids are unique only inside a Group.
type itemKey struct{ group, id string }

// sched is the scheduler's item id: Group and WorkItem ids cannot contain
// '/', so it is unambiguous.
func (k itemKey) sched() string { return k.group + "/" + k.id }

func keyOf(schedID string) itemKey {
	for i := 0; i < len(schedID); i++ {
		if schedID[i] == '/' {
			return itemKey{schedID[:i], schedID[i+1:]}
		}
	}
	return itemKey{id: schedID}
}

// phase is where an item is in this worker (package item decides it).
type phase = lc.Phase

const (
	phAccepting = lc.Accepting // accept_offer sent; in the scheduler, gated
	phQueued    = lc.Queued    // owned; in the scheduler
	phStarting  = lc.Starting  // picked; work.start sent, waiting for the lease
	phRunning   = lc.Running   // in a slot under a lease
	phFinishing = lc.Finishing // the run ended; its command is being sent
)

// item is the worker's record of one WorkItem it accepted or owns: its
// lifecycle state (lc.Item, which lc.Step decides) and what the engine
// keeps beside it to carry the decisions out.
type item struct {
	lc.Item
	key     itemKey
	inSched bool

	missionID string
	slot      int
	renewals  int
	attempt   uint64 // the run's first attempt, 1-based across acceptances

	progress   *protocol.Progress
	reportedAt time.Time // last progress sent or buffered (usage deltas)

	// cmds are this item's commands in order; only the head is in flight,
	// so a publish lands before the submit that releases the lease.
	cmds []*itemCmd
	// conflict is a command refused with REVISION_CONFLICT, held until
	// the projection has the current revision (worker_revision.go).
	conflict *msgSent

	// pickedAt and startedAt are when the scheduler picked the item and
	// when its run began (observed durations, worker_observe.go).
	pickedAt, startedAt time.Time
}

// newItem is a record in phase p.
func newItem(k itemKey, p phase, missionID string) *item {
	return &item{Item: lc.Item{ID: k.id, Phase: p}, key: k, missionID: missionID}
}

// core is the lifecycle state lc.Step reads, with the command count.
func (it *item) core() lc.Item {
	c := it.Item
	c.Pending = len(it.cmds)
	return c
}

// schedItem is the scheduler's view of a projected entry (spec 11.1 inputs).
func (e *engine) schedItem(k itemKey, en queue.Entry, hold bool) scheduler.Item {
	u, err := scheduler.ParseUrgency(string(en.Urgency))
	if err != nil {
		u = scheduler.UrgencyNormal
	}
	imp, err := scheduler.ParseImpact(string(en.BusinessImpact))
	if err != nil {
		imp = scheduler.ImpactMedium
	}
	est, runs := e.estimateOf(en)
	if runs == 0 {
		// No run of its capabilities seen yet: the scheduler charges the
		// Group's observed mean (the configured Estimate until one finished)
		// rather than a fixed guess that can be far from the Group's runs —
		// a one-minute guess on half-second runs makes sharing 1:1 whatever
		// the weights.
		est = 0
	}
	it := scheduler.Item{
		ID: k.sched(), Group: k.group, Urgency: u, Impact: imp, Deadline: en.Deadline.Time,
		Estimate: est, Observed: runs, Preemptible: true,
		Gates: scheduler.Gates{
			DependenciesPending: !en.DependenciesSatisfied(),
			ApprovalRequired:    en.ApprovalRequired,
			ApprovalGranted:     en.RiskGatePassed(),
			OwnershipLost:       hold,
		},
	}
	for _, c := range en.Capabilities {
		it.Capabilities = append(it.Capabilities, c.ID+"@"+c.Version)
	}
	return it
}

// ensureGroup gives the scheduler a Group's share: its configured weight
// and quota and the Mission's priority class.
func (e *engine) ensureGroup(group string) {
	gc := scheduler.GroupConfig{Weight: 1, Quota: e.cfg.GroupQuotas[group]}
	if w := e.cfg.GroupWeights[group]; w > 0 {
		gc.Weight = w
	}
	if m, ok := e.store.Mission(group); ok {
		switch m.PriorityClass {
		case protocol.PriorityLow:
			gc.Class = scheduler.ClassLow
		case protocol.PriorityHigh:
			gc.Class = scheduler.ClassHigh
		case protocol.PriorityCritical:
			gc.Class = scheduler.ClassCritical
		}
	}
	if old, ok := e.groups[group]; ok && old == gc {
		return
	}
	if err := e.sched.SetGroup(group, gc); err != nil {
		e.log.Error("scheduler group", "group", group, "err", err)
		return
	}
	e.groups[group] = gc
}

// enqueue puts an item in the scheduler, or updates its inputs there.
func (e *engine) enqueue(it *item, en queue.Entry, now time.Time) {
	e.scheduleChanged()
	e.ensureGroup(it.key.group)
	si := e.schedItem(it.key, en, it.Hold)
	if it.inSched {
		g := si.Gates
		if err := e.sched.Update(si.ID, scheduler.Change{Urgency: &si.Urgency, Impact: &si.Impact, Deadline: &si.Deadline,
			Estimate: &si.Estimate, Observed: &si.Observed, Gates: &g}, now); err != nil {
			e.log.Error("scheduler update", "item", si.ID, "err", err)
		}
		return
	}
	at := now
	if t := en.EnqueuedAt.Time; !t.IsZero() && t.Before(now) {
		at = t
	}
	if err := e.sched.Enqueue(si, at); err != nil {
		e.log.Error("scheduler enqueue", "item", si.ID, "err", err)
		return
	}
	it.inSched = true
}

// unschedule takes a waiting item out of the scheduler.
func (e *engine) unschedule(it *item) {
	if !it.inSched {
		return
	}
	e.scheduleChanged()
	if st, ok := e.sched.Status(it.key.sched()); ok && (st.State == scheduler.StateQueued || st.State == scheduler.StateBlocked) {
		_ = e.sched.Remove(it.key.sched())
	}
	it.inSched = false
}

// endRun tells the scheduler a run is over: finished (Finish) or back to
// its queue (Release).
func (e *engine) endRun(it *item, requeue bool, now time.Time) {
	id := it.key.sched()
	st, ok := e.sched.Status(id)
	if !ok || (st.State != scheduler.StateRunning && st.State != scheduler.StatePreempting) {
		return
	}
	e.scheduleChanged() // a slot freed or an item back in its queue
	if requeue {
		_ = e.sched.Release(id, now)
		return
	}
	_ = e.sched.Finish(id, now)
	it.inSched = false
}
