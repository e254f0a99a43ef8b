package runtime

import (
	"maps"
	"time"

	"github.com/missionweave/mwp-worker/queue"
)

// DefaultForgetGrace is how long a Group stays over for this worker (its
// Mission terminal, nothing of the worker held) before it is forgotten:
// long enough for the coordinator's last messages and an operator's
// `inspect` of a Mission that just ended.
const DefaultForgetGrace = 10 * time.Minute

// groupHolds is what a Group still holds of this worker.
type groupHolds struct {
	terminal bool // the Mission is approved, cancelled or terminated
	items    int  // items the engine tracks (offered, running, sending)
	owned    int  // items the view says this worker owns that are not terminal
	offline  int  // commands in the offline buffer
	notices  int  // notices queued, in flight or with a disclosure baseline
}

// over reports a Group this worker may forget: its Mission terminal and
// nothing of the worker in it. (A Command in the outbox also holds it:
// queue.Store.Forget refuses then.)
func (h groupHolds) over() bool {
	return h.terminal && h.items+h.owned+h.offline+h.notices == 0
}

// forgetDue decides, for one Group, when it was first seen over (since, ok
// false when it is not over now) and whether its grace has passed at now.
func forgetDue(h groupHolds, seen time.Time, seenOK bool, now time.Time, grace time.Duration) (since time.Time, over, due bool) {
	if !h.over() {
		return time.Time{}, false, false
	}
	if !seenOK {
		return now, true, grace == 0
	}
	return seen, true, !now.Before(seen.Add(grace))
}

// stepForget forgets the Groups over for this worker past the grace
// (queue.Store.Forget: buckets dropped, a tombstone kept) and stops
// subscribing them. It looks at most every quarter of the grace.
func (e *engine) stepForget(now time.Time) {
	grace := e.cfg.ForgetGrace
	if grace < 0 || now.Before(e.forgetNext) {
		return
	}
	e.forgetNext = now.Add(max(grace/4, e.cfg.Tick))
	holds := e.groupHolds()
	for _, g := range e.store.GroupIDs() {
		seen, ok := e.overSince[g]
		since, over, due := forgetDue(holds(g), seen, ok, now, grace)
		switch {
		case !over:
			delete(e.overSince, g)
		case !due:
			e.overSince[g] = since
		default:
			if err := e.forgetGroup(g); err != nil {
				e.log.Debug("group over, not forgotten yet", "group", g, "err", err)
				continue
			}
			delete(e.overSince, g)
			e.forgetState(g)
			e.client.DropGroup(g)
			e.log.Info("forgot a finished Group", "group", g)
		}
	}
}

// forgetGroup drops what the worker keeps of a Group that is over: its
// checkpoints (and blob files only they name) and its Mission's tool
// ledger first, then the Group itself (queue.Store.Forget). A crash in
// between leaves the Group, still over, to be forgotten again; deleting
// the others twice changes nothing.
func (e *engine) forgetGroup(g string) error {
	m, _ := e.store.Mission(g)
	if _, err := e.cps.DeleteGroup(g); err != nil {
		return err
	}
	if m.MissionID != "" && e.ledger != nil {
		if _, err := e.ledger.ForgetMission(m.MissionID); err != nil {
			return err
		}
	}
	return e.store.Forget(g)
}

// groupHolds returns what each Group holds of this worker, reading the
// offline buffer and the notices once.
func (e *engine) groupHolds() func(g string) groupHolds {
	per := map[string]*groupHolds{}
	at := func(g string) *groupHolds {
		if per[g] == nil {
			per[g] = &groupHolds{}
		}
		return per[g]
	}
	for k := range e.items {
		at(k.group).items++
	}
	if pend, err := e.buf.Pending(); err == nil {
		for _, p := range pend {
			at(p.GroupID).offline++
		}
	} else {
		return func(string) groupHolds { return groupHolds{} } // unknown: hold everything
	}
	if n := e.notes; n != nil {
		for _, r := range n.queue {
			at(r.GroupID).notices++
		}
		for _, r := range n.sending {
			at(r.GroupID).notices++
		}
		for k := range n.baselines {
			at(k.group).notices++
		}
	}
	return func(g string) groupHolds {
		h := groupHolds{}
		if p := per[g]; p != nil {
			h = *p
		}
		m, _ := e.store.Mission(g)
		h.terminal = m.State.Terminal()
		if h.terminal {
			h.owned = ownedOpen(e.store.Items(g), e.cfg.AgentID)
		}
		return h
	}
}

func ownedOpen(items []queue.Entry, agentID string) int {
	n := 0
	for _, it := range items {
		if it.Owner == agentID && !it.State.Terminal() {
			n++
		}
	}
	return n
}

// settled drops the judgements kept of an item that ended (or is gone):
// no offer of it will come again, so a Group that stays active keeps
// them for its open items only.
func (e *engine) settled(k itemKey) {
	delete(e.refused, k)
	delete(e.clarify, k)
}

// forgetState drops what the engine and the worker keep of a Group they
// forgot, so that memory follows the Groups that are active, not every
// Group ever joined.
func (e *engine) forgetState(g string) {
	for k := range e.refused {
		if k.group == g {
			delete(e.refused, k)
		}
	}
	for k := range e.clarify {
		if k.group == g {
			delete(e.clarify, k)
		}
	}
	delete(e.rejected, g)
	delete(e.rejections, g)
	if _, ok := e.members[g]; ok {
		delete(e.members, g)
		e.shared.mu.Lock()
		e.shared.members = maps.Clone(e.members)
		e.shared.mu.Unlock()
	}
	e.w.forgetAdded(g)
}
