package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Phase is where a WorkItem is in this worker.
type Phase int

const (
	Accepting Phase = iota + 1 // accept_offer sent; in the scheduler, gated
	Queued                     // owned; in the scheduler
	Starting                   // picked; work.start sent, waiting for the lease
	Running                    // in a slot under a lease
	Finishing                  // the run ended; its commands are being sent
)

func (p Phase) String() string {
	if p < Accepting || p > Finishing {
		return "none"
	}
	return [...]string{"", "accepting", "queued", "starting", "running", "finishing"}[p]
}

// Item is the lifecycle state of one WorkItem this worker accepted or
// owns: what Step reads and changes. The engine keeps the rest of its
// record (the slot, the commands' signed bytes, progress, timings).
type Item struct {
	ID    string // the WorkItem's id within its Group
	Phase Phase
	// OfferID is the offer this worker accepted or refused; a new offer
	// of the same item is judged again.
	OfferID string
	// Hold keeps a queued item from starting until the projection changes
	// (a refused start, a checkpoint not yet applied).
	Hold bool

	Epoch   uint64    // ownership epoch
	LeaseID string    // the run's execution lease
	Expires time.Time // its expiry as last acknowledged

	Renewing   bool // a lease.renew is out
	Preempting bool // the run was asked for a safe point
	Lost       bool // the run was told its lease is lost

	// Pending is how many of the item's commands wait (the head among
	// them); Sending: the head is out.
	Pending int
	Sending bool

	// A substantially revised contract needs a renewed acceptance (spec
	// 10.1): Reaccepting is the revision whose acceptance is out,
	// Reaccepted the last one the authority confirmed; ForceRenew is set
	// when work.start was refused for want of one the projection did not
	// show (a restored snapshot does not carry the accepted revision).
	Reaccepting, Reaccepted uint64
	ForceRenew              bool

	// RenewedAt is when the lease was granted or last renewed; RetryAt
	// holds the next renewal back after one failed (or, offline, was
	// buffered).
	RenewedAt, RetryAt time.Time
	// AskedAt and AskedFor are the scheduler's preemption of this run:
	// when it was asked to yield and for which item (spec 11.3).
	AskedAt  time.Time
	AskedFor string

	// StaleMembership is a membership epoch the authority refused as
	// stale for this item's command: the next waits for a newer one.
	// AwaitSeq is the last event the item's previous command caused: a
	// revisioned command waits until the projection has it (spec 15.3).
	StaleMembership uint64
	AwaitSeq        uint64

	// Cost is the expected cost admission accepted the item with: what it
	// holds of the worker's budget limits until it is forgotten.
	Cost protocol.Usage
}

// RenewDue is when the lease should be renewed next.
func (it Item) RenewDue() time.Time {
	at := RenewAt(it.RenewedAt, it.Expires)
	if it.RetryAt.After(at) {
		return it.RetryAt
	}
	return at
}

// LeaseOver reports that the run's lease has ended by the worker's clock.
// Only online: offline, the grace of spec 11.5 decides and reconciliation
// settles the lease. Nothing more is sent under such a lease, whatever an
// authority whose clock is behind would still accept.
func (it Item) LeaseOver(online bool, now time.Time) bool {
	return online && !it.Expires.IsZero() && !now.Before(it.Expires)
}

// Revisioned reports whether commands of typ carry expectedRevision (spec
// 15.3): those that change a WorkItem's state.
func Revisioned(typ protocol.CommandType) bool {
	r := protocol.Commands[typ]
	return r.Aggregate == protocol.AggregateWorkItem && len(r.WorkFrom) > 0
}

// LeaseOf is the execution lease a command's payload names, "" for none.
func LeaseOf(payload any) string {
	switch p := payload.(type) {
	case *protocol.SubmitWorkPayload:
		return p.LeaseID
	case *protocol.BlockWorkPayload:
		return p.LeaseID
	case *protocol.FailWorkPayload:
		return p.LeaseID
	case *protocol.CheckpointWorkPayload:
		return p.LeaseID
	case *protocol.RenewLeasePayload:
		return p.LeaseID
	case *protocol.PublishArtifactPayload:
		return p.LeaseID
	}
	return ""
}
