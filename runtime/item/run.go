package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Launched is a lease granted for the item's start (its work.start
// answered, or a start whose answer was lost adopted): the run starts
// under it.
type Launched struct {
	LeaseID string
	Expires time.Time
	Epoch   uint64 // the ownership epoch the lease is under
	// Attempts is the WorkItem's count as the store shows it: every
	// acceptance's runs, this acceptance's included.
	Attempts uint64
}

// StartFailed: the slot could not start the run (no handler, a contract
// it cannot read): nothing ran.
type StartFailed struct {
	Reason  string
	AgentID string
	Online  bool
}

func (Launched) input()    {}
func (StartFailed) input() {}

// StartRun starts the handler in a slot under the item's lease. Attempt
// is the run's first attempt, 1-based across acceptances; the slot counts
// its retries on from there (PriorAttempts is Attempt-1).
type StartRun struct{ Attempt uint64 }

func (StartRun) effect() {}

// PriorAttempts is how many attempts earlier acceptances made: the
// WorkItem's attempts count this acceptance too, so a first run is
// attempt 1 whether the store says 0 (no acceptance recorded yet) or 1.
func PriorAttempts(attempts uint64) uint64 {
	if attempts == 0 {
		return 0
	}
	return attempts - 1
}

// launched starts a run under a granted lease. A record already running
// or finishing a run starts no second one.
func launched(it Item, l Launched, now time.Time) (Item, []Effect) {
	if it.Phase == Running || it.Phase == Finishing || it.Phase == 0 {
		return it, nil
	}
	it.Phase, it.Epoch, it.LeaseID, it.Expires = Running, l.Epoch, l.LeaseID, l.Expires
	it.Lost, it.Preempting = false, false
	it.RenewedAt, it.RetryAt, it.AskedAt = now, time.Time{}, time.Time{}
	return it, []Effect{StartRun{Attempt: PriorAttempts(l.Attempts) + 1}}
}

// startFailed reports a run that could not start: the failure goes out
// under the new lease, which releases the item.
func startFailed(it Item, f StartFailed, now time.Time) (Item, []Effect) {
	if it.Phase != Running {
		return it, nil
	}
	it.Phase = Finishing
	if it.LeaseOver(f.Online, now) {
		// Not under a lease just granted; kept so that nothing is ever
		// sent under an ended one.
		return it, []Effect{EndRun{}, Forget{}, Sync{}}
	}
	return it, []Effect{EndRun{}, Send{Type: protocol.CmdWorkFail, Payload: &protocol.FailWorkPayload{WorkItemID: it.ID, Reason: f.Reason,
		Evidence: FailureEvidence(it.ID, f.AgentID, now), OwnershipEpoch: protocol.Uint64(it.Epoch), LeaseID: it.LeaseID}}}
}
