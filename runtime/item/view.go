package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Viewed is the store's view of the item after a transaction changed it
// (or when the worker starts): what the authority's log says of it, read
// by the engine. Step with a zero Item (Phase 0) is an item the worker
// keeps no record of.
type Viewed struct {
	Known bool // the store has the item
	State protocol.WorkItemState
	// Mine: owned by this worker; OfferedToMe: a standing offer names it
	// among the candidates.
	Mine, OfferedToMe bool
	OfferID           string
	OwnershipEpoch    uint64
	// LeaseID and LeaseExpires are the execution lease the store shows;
	// StartedHere: granted to this worker's current session.
	LeaseID      string
	LeaseExpires time.Time
	StartedHere  bool
	// ContractRevision is the contract's; AcceptedRevision the one this
	// worker's acceptance named (0: unknown, restored from a snapshot).
	ContractRevision, AcceptedRevision uint64
	// Judged: the standing offer was judged already and nothing that
	// decided it has changed (the engine's refusals). RenewalRefused: this
	// worker refused the contract's current revision already (and released
	// the item; the release itself may have been refused).
	Judged, RenewalRefused bool
}

// The view's effects.
type (
	// Admit runs admission control on the standing offer.
	Admit struct{}
	// AdmitIfForgotten admits once a dropped record is gone; a record
	// with commands still out holds the scheduler entry until they are
	// answered, and the view is read again then.
	AdmitIfForgotten struct{}
	// Created starts a record for an item owned and queued: Step's Item
	// is the new record.
	Created struct{}
	// DropCommands drops the commands still waiting: they carry an
	// ownership epoch the authority has fenced.
	DropCommands struct{}
	// Enqueue puts the item in the scheduler, or updates its inputs.
	Enqueue struct{}
	// RenewAcceptance judges the revised contract again (spec 10.1).
	RenewAcceptance struct{}
	// Launch runs the item under the lease the store shows.
	Launch struct{}
	// Adopt runs a queued item under a lease of this session whose
	// start's answer was lost, with no new start.
	Adopt struct{}
	// Renewed records the lease's new expiry.
	Renewed struct{ Expires time.Time }
)

func (Admit) effect()            {}
func (AdmitIfForgotten) effect() {}
func (Created) effect()          {}
func (DropCommands) effect()     {}
func (Enqueue) effect()          {}
func (RenewAcceptance) effect()  {}
func (Launch) effect()           {}
func (Adopt) effect()            {}
func (Renewed) effect()          {}
func (Viewed) input()            {}

// waiting reports a record that is neither running nor finishing.
func (it Item) waiting() bool { return it.Phase != 0 && it.Phase != Running && it.Phase != Finishing }

// viewed reconciles the item with the authority's view: the lease of a
// running item must still be shown, an offer to this worker is judged, an
// item owned and queued is scheduled (or its acceptance renewed), a lease
// granted to this session is run, and a record the view no longer
// supports is dropped.
func viewed(it Item, v Viewed, now time.Time) (Item, []Effect) {
	mine := v.Known && v.Mine
	if it.Phase == Running && !(mine && v.State == protocol.WorkActive && v.LeaseID == it.LeaseID) {
		// Any view but "active under our lease" means the lease is gone:
		// revoked by a replacement session, fenced, cancelled; also for a
		// run asked to yield that has not yet.
		return it, []Effect{LoseLease{Why: "the authority no longer shows this lease"}}
	}
	switch {
	case !v.Known:
		if it.waiting() {
			return it, []Effect{Drop{}}
		}
	case v.State == protocol.WorkOffered && v.OfferedToMe:
		return offered(it, v)
	case mine && v.State == protocol.WorkQueued:
		return ownedQueued(it, v)
	case mine && v.State == protocol.WorkActive:
		return ownedActive(it, v, now)
	case mine && (v.State == protocol.WorkBlocked || v.State == protocol.WorkSubmitted):
		if it.waiting() {
			return it, []Effect{Drop{}}
		}
	default:
		return notOurs(it, v)
	}
	return it, nil
}

// offered judges a standing offer to this worker, unless it was judged
// already and nothing that decided it changed, or a run of the item is
// still here.
func offered(it Item, v Viewed) (Item, []Effect) {
	if v.Judged {
		return it, nil
	}
	switch {
	case it.Phase == 0:
		return it, []Effect{Admit{}}
	case it.OfferID != v.OfferID && it.waiting():
		return it, []Effect{Drop{}, AdmitIfForgotten{}}
	}
	return it, nil
}

// ownedQueued schedules an item this worker owns that waits to start.
func ownedQueued(it Item, v Viewed) (Item, []Effect) {
	var out []Effect
	if it.Phase == Finishing && it.Epoch != 0 && it.Epoch < v.OwnershipEpoch {
		// Ours again under a newer ownership epoch (re-offered to us after
		// our lease lapsed) while the old run's commands still wait: they
		// carry the fenced epoch and could only be refused, and they would
		// keep the new run from starting. The late result is never current.
		out = append(out, DropCommands{})
		if it.Sending {
			return it, out // forgotten when the answer comes; the view is read then
		}
		out = append(out, Forget{})
		it = Item{ID: it.ID}
	}
	if it.Phase == 0 {
		it = Item{ID: it.ID, Phase: Queued}
		out = append(out, Created{})
	}
	it.Epoch = v.OwnershipEpoch
	if it.Phase != Accepting && it.Phase != Queued {
		return it, out
	}
	// Owned now, or its view changed: a hold ends here, unless the
	// contract was revised since this worker accepted it.
	it.Phase, it.Hold = Queued, false
	if it.needsRenewal(v) {
		switch {
		case v.RenewalRefused:
			return it, append(out, Drop{}) // refused and released already; never started
		case it.Reaccepting == v.ContractRevision && !it.ForceRenew:
			it.Hold = true // sent; the answer or its event ends the wait
			return it, append(out, Enqueue{})
		}
		return it, append(out, RenewAcceptance{})
	}
	return it, append(out, Enqueue{})
}

// needsRenewal reports whether an owned, queued item's contract was
// revised after this worker accepted it (spec 10.1). An accepted revision
// of 0 is unknown (restored from a snapshot): work.start tells then.
func (it Item) needsRenewal(v Viewed) bool {
	accepted := max(v.AcceptedRevision, it.Reaccepted)
	return it.ForceRenew || (accepted != 0 && accepted < v.ContractRevision)
}

// ownedActive follows an item this worker owns that is active: the lease
// of its start, a lease whose start's answer was lost, a renewal.
func ownedActive(it Item, v Viewed, now time.Time) (Item, []Effect) {
	switch it.Phase {
	case Starting:
		if v.StartedHere {
			return it, []Effect{Launch{}}
		}
	case Queued:
		// A start the authority applied whose answer was lost, and a
		// rebuilt start refused as the item is active: the lease is this
		// worker's. It runs under it once the scheduler gives it a slot,
		// with no new start. Not the lease of a run it already had (a
		// checkpoint released that one; its event may not have arrived).
		if v.StartedHere && v.OwnershipEpoch == it.Epoch && v.LeaseID != it.LeaseID && !it.Sending {
			it.Hold = false
			return it, []Effect{Adopt{}, Enqueue{}}
		}
	case Running:
		if v.LeaseID == it.LeaseID && !v.LeaseExpires.Equal(it.Expires) {
			it.Expires, it.RenewedAt = v.LeaseExpires, now
			return it, []Effect{Renewed{Expires: v.LeaseExpires}}
		}
	}
	return it, nil
}

// notOurs drops a waiting record of an item not ours (any more),
// terminal, or open again.
func notOurs(it Item, v Viewed) (Item, []Effect) {
	switch it.Phase {
	case Accepting:
		if v.State != protocol.WorkOffered {
			return it, []Effect{Drop{}}
		}
	case Queued:
		return it, []Effect{Drop{}}
	case Starting:
		return it, []Effect{EndRun{}, Drop{}}
	}
	return it, nil
}
