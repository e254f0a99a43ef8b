package runtime

import (
	"errors"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// Optimistic concurrency (spec 15.3). A command that changes a WorkItem's
// state (protocol.Commands: a workItem aggregate with states it is allowed
// from) carries the item's revision as the worker's projection has it.
// The worker's own previous command on the item is applied to the
// projection first (its receipt names the events), so the worker does not
// conflict with itself. A REVISION_CONFLICT means someone else changed
// the item: the worker waits until its projection has the current
// revision, then decides again whether the command still applies (the
// state allows it, the offer, ownership and lease it names are still the
// ones the projection shows): yes, it is built again on the new revision;
// no, it is settled as the refusal it would have been.

// revisioned reports whether commands of typ carry expectedRevision.
func revisioned(typ protocol.CommandType) bool { return lc.Revisioned(typ) }

// expectedRevision is the revision a command of typ about it expects, nil
// when it carries none.
func (e *engine) expectedRevision(it *item, typ protocol.CommandType) *uint64 {
	if !revisioned(typ) {
		return nil
	}
	en, ok := e.store.Item(it.key.group, it.key.id)
	if !ok {
		return nil
	}
	return protocol.Uint64(en.Revision)
}

// sentApplied records the events a command caused, for lc.Due (an own command waits for them).
func (it *item) sentApplied(r *protocol.Receipt) {
	if r == nil {
		return
	}
	for _, ev := range r.Events {
		if ev.GroupID == it.key.group && ev.Sequence != nil {
			it.AwaitSeq = max(it.AwaitSeq, *ev.Sequence)
		}
	}
}

// conflicted holds a command the authority refused with REVISION_CONFLICT
// until the projection has the revision it named.
func (e *engine) conflicted(it *item, m msgSent, now time.Time) {
	e.log.Info("revision conflict; reading the item again before deciding", "type", m.typ, "item", m.key.sched(), "err", m.err)
	it.conflict = &m
	e.redecide(it, now)
}

// redecide settles a held conflict once the projection has caught up.
func (e *engine) redecide(it *item, now time.Time) {
	m := it.conflict
	if m == nil || len(it.cmds) == 0 || it.cmds[0] != m.cmd {
		it.conflict = nil
		return
	}
	en, ok := e.store.Item(it.key.group, it.key.id)
	var pe *protocol.Error
	current, known := uint64(0), false
	if errors.As(m.err, &pe) {
		current, known = detailUint(pe.Details, "currentRevision")
	}
	applies := ok && e.stillApplies(m.cmd, en)
	switch {
	case ok && known && en.Revision < current:
		return // not there yet: sync calls again when the item changes
	case applies && !known && m.cmd.expected != nil && en.Revision <= *m.cmd.expected:
		// No revision named: the projection must at least have moved
		// past the one the command expected, or it would conflict again.
		return
	}
	it.conflict = nil
	if applies {
		e.log.Info("command still applies; sending it on the current revision", "type", m.typ, "item", m.key.sched(), "revision", en.Revision)
		m.cmd.raw = nil
		e.pump(it)
		return
	}
	e.answer(it, *m, true, now)
}

// stillApplies reports whether command c is still what the item needs in
// the state the projection shows.
func (e *engine) stillApplies(c *itemCmd, en queue.Entry) bool {
	if !slices.Contains(protocol.Commands[c.typ].WorkFrom, en.State) {
		return false
	}
	me := e.cfg.AgentID
	leased := func(epoch uint64, lease string) bool {
		return en.Owner == me && en.OwnershipEpoch == epoch && en.Lease != nil && en.Lease.LeaseID == lease
	}
	switch p := c.payload.(type) {
	case *protocol.AcceptOfferPayload:
		return p.ContractRevision == en.ContractRevision &&
			(en.Owner == me || (en.Offer != nil && en.Offer.OfferID == p.OfferID && en.OfferedTo(me)))
	case *protocol.StartWorkPayload:
		return en.Owner == me && en.OwnershipEpoch == p.OwnershipEpoch
	case *protocol.RenewLeasePayload:
		return leased(p.OwnershipEpoch, p.LeaseID)
	case *protocol.CheckpointWorkPayload:
		return leased(p.OwnershipEpoch, p.LeaseID)
	case *protocol.BlockWorkPayload:
		return leased(p.OwnershipEpoch, p.LeaseID)
	case *protocol.SubmitWorkPayload:
		return leased(p.OwnershipEpoch, p.LeaseID)
	case *protocol.FailWorkPayload:
		if p.OwnershipEpoch == nil {
			return false
		}
		if p.LeaseID != "" {
			return leased(*p.OwnershipEpoch, p.LeaseID)
		}
		return en.Owner == me && en.OwnershipEpoch == *p.OwnershipEpoch
	}
	return false
}
