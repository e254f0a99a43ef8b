package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Conn is the worker's connection to the authority as the offline Monitor
// tells it (spec 11.5).
type Conn int

const (
	Online      Conn = iota // connected and reconciled
	Offline                 // the authority is unreachable
	Reconciling             // back, the offline buffer not yet reconciled
)

// Ticked is the loop's look at a running item as time passes: renewals
// due, a lease ended by the worker's clock, the offline grace, a
// preemption that found no safe point.
type Ticked struct {
	Conn Conn
	// Grace is the lease's offline grace deadline (zero: none; spec 11.5:
	// irreversible work has none).
	Grace time.Time
	// Tick is the loop's period; PreemptTimeout how long a preempted run
	// may take to reach a safe point.
	Tick, PreemptTimeout time.Duration
	// Victim: the scheduler has the run as a preemption victim still.
	Victim bool
	// Progress is what a renewal reports: the handler's last structured
	// progress.
	Progress protocol.Progress
}

// PreemptAsked asks a run to yield at its next safe point.
type PreemptAsked struct {
	// Why: scheduler (For is the item it yields to; "" keeps the one
	// already named), shutdown, offline-grace, offline-buffer-full.
	Why, For string
	// ByPool: the pool's shutdown asks the slot itself.
	ByPool bool
}

func (Ticked) input()       {}
func (PreemptAsked) input() {}

// The clock's effects.
type (
	// BufferRenewal buffers the lease.renew offline, signed with the
	// offline binding (spec 11.5).
	BufferRenewal struct{ Payload *protocol.RenewLeasePayload }
	// ExtendSlot extends the slot's lease to the grace deadline: reversible
	// work runs on through the grace; reconciliation settles the lease.
	ExtendSlot struct{ Until time.Time }
	// Preempt asks the run's slot for a safe point (spec 11.3).
	Preempt struct {
		Why, For string
		ByPool   bool
	}
	// RefusePreemption: the run found no safe point within the timeout.
	// It is never interrupted for it: it keeps its slot, the scheduler
	// records the refusal.
	RefusePreemption struct {
		For    string
		Waited time.Duration
	}
)

func (BufferRenewal) effect()    {}
func (ExtendSlot) effect()       {}
func (Preempt) effect()          {}
func (RefusePreemption) effect() {}

// ticked decides what the time calls for, in this order: a renewal at half
// the lease's remaining time (online: lease.renew with the progress;
// offline: buffered, tried again ten ticks on); online, a lease that ended
// by the worker's clock without an accepted renewal is lost, and not
// renewed (nothing is sent under it); offline, a reversible run's slot
// runs on to the grace deadline and is asked for a safe point two ticks
// before it; a preemption that found no safe point is refused.
func ticked(it Item, t Ticked, now time.Time) (Item, []Effect) {
	var out []Effect
	running := it.Phase == Running
	over := it.LeaseOver(t.Conn == Online, now)
	if running && !it.Renewing && !it.Lost && !over && !now.Before(it.RenewDue()) {
		p := &protocol.RenewLeasePayload{WorkItemID: it.ID, OwnershipEpoch: it.Epoch, LeaseID: it.LeaseID, Progress: t.Progress}
		switch t.Conn {
		case Online:
			it.Renewing = true
			out = append(out, Send{Type: protocol.CmdLeaseRenew, Payload: p})
		case Offline:
			it.RetryAt = now.Add(10 * t.Tick)
			out = append(out, BufferRenewal{Payload: p})
		}
	}
	if running && !it.Lost && over {
		out = append(out, LoseLease{Why: "the lease ended without an accepted renewal"})
	}
	if running && t.Conn != Online {
		var more []Effect
		it, more = graceful(it, t, now)
		out = append(out, more...)
	}
	if !it.AskedAt.IsZero() && now.Sub(it.AskedAt) >= t.PreemptTimeout {
		waited, forID := now.Sub(it.AskedAt), it.AskedFor
		it.AskedAt, it.AskedFor = time.Time{}, ""
		if running && !it.Lost && t.Victim {
			out = append(out, RefusePreemption{For: forID, Waited: waited})
		}
	}
	return it, out
}

// graceful is the offline grace of a running item (spec 11.5): its slot
// runs on to the deadline, and is asked for a safe point two ticks before.
func graceful(it Item, t Ticked, now time.Time) (Item, []Effect) {
	if t.Grace.IsZero() {
		return it, nil
	}
	var out []Effect
	if t.Grace.After(it.Expires) {
		out = append(out, ExtendSlot{Until: t.Grace})
	}
	if !it.Preempting && !now.Before(t.Grace.Add(-2*t.Tick)) {
		it.Preempting = true
		out = append(out, Preempt{Why: "offline-grace"})
	}
	return it, out
}

// preemptAsked asks a running item for a safe point once; the scheduler's
// request is timed from now whatever the phase (a victim picked while
// starting is asked once its run starts).
func preemptAsked(it Item, p PreemptAsked, now time.Time) (Item, []Effect) {
	if p.Why == "scheduler" {
		it.AskedAt = now
		if p.For != "" {
			it.AskedFor = p.For
		}
	}
	if it.Phase != Running || it.Preempting {
		return it, nil
	}
	it.Preempting = true
	return it, []Effect{Preempt{Why: p.Why, For: it.AskedFor, ByPool: p.ByPool}}
}
