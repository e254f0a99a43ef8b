package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Input is what Step is told: one of the types below.
type Input interface{ input() }

// Answered is the authority's answer to one of the item's commands, or
// the end of a send that got none.
type Answered struct {
	Type    protocol.CommandType
	Payload any
	// Err is nil when the command was applied; a *protocol.Error is the
	// authority's refusal; anything else is a send that got no answer.
	Err error
	// Head: the command is still at the head of the item's chain (a
	// retry is only decided for it).
	Head bool
	// Decided: a held revision conflict decided no longer to apply; it is
	// settled as the refusal it was, never sent again.
	Decided bool
	// Stale: the client did not send it within its freshness window.
	Stale bool
	// Stopping: no answer because the worker is stopping (its sends ended
	// or the client no longer runs): not a lost answer to send again.
	Stopping bool
	// MembershipEpoch is the one the command was signed with.
	MembershipEpoch uint64
	Tries           int           // retryable answers so far
	Tick            time.Duration // the back-off's unit
	AgentID         string        // the producer of evidence the worker writes
	Draining        bool
	Online          bool
}

// End is how a run ended: protocol.RunEnd, the one enumeration slots
// reports outcomes in (slots.OutcomeKind).
type End = protocol.RunEnd

// The ends of a run and what each calls for.
const (
	Completed = protocol.RunCompleted // the handler returned a result: work.submit
	Preempted = protocol.RunPreempted // it yielded at a checkpoint: work.checkpoint
	Blocked   = protocol.RunBlocked   // it called Block: work.block
	Failed    = protocol.RunFailed    // beyond its retry policy, or cancelled: work.fail
	LeaseLost = protocol.RunLeaseLost // the lease was lost: nothing is sent
)

// RunEnded is a run's outcome, from its slot.
type RunEnded struct {
	End       End
	Artifacts []string            // Completed
	Evidence  []protocol.Evidence // Completed: the result's; Failed: the failure's
	Reason    string              // Failed
	Progress  *protocol.Progress  // the run's last report
	AgentID   string              // the producer of evidence the worker writes itself
	Online    bool                // not offline or reconciling
	Draining  bool
}

// Reconciled is the worker back online after an outage: a run's outcome
// held meanwhile (submission, block, failure) is sent now, unless its
// lease has ended by the worker's clock since.
type Reconciled struct {
	Run RunEnded
	// Expires is the lease's expiry as the store shows it now (zero: the
	// store does not show the lease): reconciliation may have extended it.
	Expires time.Time
}

// Due is the head command of the item about to be sent.
type Due struct {
	Type    protocol.CommandType
	Payload any
	Online  bool
	// Expires is the lease's expiry as the store shows it now (zero: not
	// shown): a renewal answered after the run ended extended it.
	Expires time.Time
	// Membership is the worker's membership epoch in the Group (0: none
	// known yet); Cursor the projection's last event of the Group;
	// Conflicted: a command of the item refused with REVISION_CONFLICT is
	// held; RetryAt ends the command's back-off.
	Membership, Cursor uint64
	Conflicted         bool
	RetryAt            time.Time
}

func (Answered) input()   {}
func (RunEnded) input()   {}
func (Reconciled) input() {}
func (Due) input()        {}
