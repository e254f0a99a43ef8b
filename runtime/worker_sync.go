package runtime

import (
	"maps"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// onApplied feeds what a store transaction changed to the scheduler:
// memberships first (commands need them), then every changed WorkItem.
func (e *engine) onApplied(res queue.Result) {
	e.w.m.applied(res)
	for _, d := range res.Diverged {
		e.onDiverged(d)
	}
	for _, c := range res.Cursors {
		if n := e.rejections[c.GroupID]; n > 0 {
			e.log.Info("group subscribed", "group", c.GroupID, "afterRefusals", n)
			delete(e.rejections, c.GroupID)
		}
	}
	me := protocol.Actor{Kind: protocol.ActorAgent, ID: e.cfg.AgentID}
	for _, r := range res.Members {
		if r.Principal != me {
			continue
		}
		if epoch, ok := membershipIn(e.store, r.GroupID, e.cfg.AgentID); ok {
			e.members[r.GroupID] = epoch
		} else {
			delete(e.members, r.GroupID)
		}
		e.shared.mu.Lock()
		e.shared.members = maps.Clone(e.members)
		e.shared.mu.Unlock()
		for _, it := range e.items { // commands that waited for the epoch
			if it.key.group == r.GroupID {
				e.pump(it)
			}
		}
	}
	for _, it := range e.items { // commands that waited for their own events
		if it.AwaitSeq > 0 && len(it.cmds) > 0 && !it.Sending {
			e.pump(it)
		}
	}
	seen := map[itemKey]bool{}
	for _, c := range res.Changed {
		k := itemKey{c.GroupID, c.WorkItemID}
		if !seen[k] {
			seen[k] = true
			e.sync(k)
		}
	}
	if len(res.Changed) == 0 && len(res.Cursors) > 0 {
		// A restored snapshot changes items without listing them.
		for _, c := range res.Cursors {
			if _, ok := e.groups[c.GroupID]; !ok {
				e.syncGroup(c.GroupID)
			}
		}
	}
}

// syncAll rebuilds the scheduler from the store: at start, the queue is
// the projection of the durable inbox (spec 11.1).
func (e *engine) syncAll() {
	for _, g := range e.store.GroupIDs() {
		e.syncGroup(g)
	}
}

func (e *engine) syncGroup(g string) {
	for _, en := range e.store.Items(g) {
		if en.Concerns(e.cfg.AgentID) || e.items[itemKey{g, en.WorkItemID}] != nil {
			e.sync(itemKey{g, en.WorkItemID})
		}
	}
}

// sync reconciles the worker's record of one item with the authority's
// view in the store: lc.Step decides (Viewed), sync carries it out.
func (e *engine) sync(k itemKey) {
	if e.diverged(k.group) { // worker_diverge.go
		if it := e.items[k]; it != nil && it.Phase != phRunning && it.Phase != phFinishing {
			e.drop(it)
		}
		return
	}
	now := e.cfg.Clock.Now()
	en, ok := e.store.Item(k.group, k.id)
	if !ok || en.State.Terminal() {
		e.settled(k)
	}
	it := e.items[k]
	if it != nil && it.conflict != nil {
		e.redecide(it, now)
		if it = e.items[k]; it == nil {
			return // settled and forgotten; sync ran then
		}
	}
	cur := lc.Item{ID: k.id}
	if it != nil {
		cur = it.core()
	}
	next, effs := lc.Step(cur, e.viewOf(k, en, ok), now)
	if it != nil && !slices.ContainsFunc(effs, func(ef lc.Effect) bool { _, c := ef.(lc.Created); return c }) {
		it.Item = next
	}
	for _, ef := range effs {
		it = e.carryView(k, it, next, en, ef, now)
	}
}

// viewOf is the store's entry as lc reads it.
func (e *engine) viewOf(k itemKey, en queue.Entry, ok bool) lc.Viewed {
	if !ok {
		return lc.Viewed{}
	}
	me := e.cfg.AgentID
	v := lc.Viewed{Known: true, State: en.State, Mine: en.Owner == me, OfferedToMe: en.Offer != nil && en.OfferedTo(me),
		OwnershipEpoch: en.OwnershipEpoch, StartedHere: e.startedHere(en),
		ContractRevision: en.ContractRevision, AcceptedRevision: en.Item.AcceptedRevision}
	if r, ok := e.refused[k]; ok && r.Revision == en.ContractRevision {
		v.RenewalRefused = true
	}
	if en.Offer != nil {
		v.OfferID = en.Offer.OfferID
		r, refused := e.refused[k]
		v.Judged = refused && r.Stands(en.Offer.OfferID, en.ContractRevision, e.freed)
	}
	if l := en.Lease; l != nil {
		v.LeaseID, v.LeaseExpires = l.LeaseID, l.ExpiresAt.Time
	}
	return v
}

// carryView carries out one effect of a view and returns the item's
// record as it is after it.
func (e *engine) carryView(k itemKey, it *item, next lc.Item, en queue.Entry, ef lc.Effect, now time.Time) *item {
	switch ef := ef.(type) {
	case lc.Admit:
		e.admit(k, en, now)
	case lc.AdmitIfForgotten:
		if e.items[k] == nil {
			e.admit(k, en, now)
		}
		// The old record still has commands out (a work.start whose
		// answer was lost with the connection): its run holds the
		// scheduler entry until they are answered, and sync runs again
		// then (onSent).
	case lc.DropCommands:
		it.cmds = nil
	case lc.Forget:
		e.forget(it)
		return nil
	case lc.Created:
		it = newItem(k, next.Phase, en.MissionID)
		it.Item = next
		e.items[k] = it
	case lc.Enqueue:
		e.enqueue(it, en, now)
	case lc.RenewAcceptance:
		e.renewAcceptance(it, en, now)
	case lc.Launch:
		e.launch(it, en, now)
	case lc.Adopt:
		e.log.Info("adopting the lease of a start whose answer was lost", "item", k.sched(), "lease", en.Lease.LeaseID)
	case lc.Renewed:
		e.renewed(it, ef.Expires, now)
	default:
		e.carryItem(it, ef, now)
	}
	return it
}

// startedHere reports whether the store shows the item active under a
// lease granted to this worker's current session: the answer to one of its
// own work.start commands.
func (e *engine) startedHere(en queue.Entry) bool {
	l := en.Lease
	return en.State == protocol.WorkActive && en.Owner == e.cfg.AgentID &&
		l != nil && l.AgentID == e.cfg.AgentID && l.SessionEpoch == e.sess.epoch
}

// adoptable reports whether a queued item may run under the lease the
// store shows without a new start: granted to this session under the
// item's ownership epoch, and not the lease of a run it already had (a
// checkpoint released that one; its event may not have arrived yet).
func (e *engine) adoptable(it *item, en queue.Entry) bool {
	return e.startedHere(en) && en.OwnershipEpoch == it.Epoch && en.Lease.LeaseID != it.LeaseID
}

// forget removes an item's record and any scheduler entry left, also the
// entry of a run that ended while its outcome waited (offline): otherwise
// the scheduler keeps it running and refuses the item when it is offered to
// this worker again under a newer epoch ("duplicate item id").
func (e *engine) forget(it *item) {
	e.freed++
	e.unschedule(it)
	if it.Phase != phRunning {
		e.endRun(it, false, e.cfg.Clock.Now())
	}
	delete(e.items, it.key)
}

// drop forgets a waiting item.
func (e *engine) drop(it *item) {
	e.unschedule(it)
	if len(it.cmds) == 0 && !it.Sending {
		e.forget(it)
		return
	}
	it.Phase = phFinishing // its commands still go out; then it is forgotten
}
