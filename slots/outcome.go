package slots

import (
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// OutcomeKind is how a run ended.
type OutcomeKind int

// The outcomes of a run.
const (
	// Completed: the handler returned a result; the host sends work.submit.
	Completed OutcomeKind = iota + 1
	// Preempted: the handler yielded at a checkpoint; the host sends
	// work.checkpoint and the item re-enters its Group queue.
	Preempted
	// Blocked: the handler called Work.Block; the host sends work.block.
	Blocked
	// Failed: the handler failed beyond its retry policy, or was
	// cancelled (hard timeout, lease expiry, budget); the host sends
	// work.fail. Never a success, whatever the handler returned.
	Failed
	// LeaseLost: the host said the lease was lost. Any result is late: it
	// may be kept for audit but must not complete the WorkItem.
	LeaseLost
)

func (k OutcomeKind) String() string {
	switch k {
	case Completed:
		return "completed"
	case Preempted:
		return "preempted"
	case Blocked:
		return "blocked"
	case Failed:
		return "failed"
	case LeaseLost:
		return "lease-lost"
	}
	return "unknown"
}

// Outcome is the one report of a run.
type Outcome struct {
	Slot Slot
	Kind OutcomeKind
	// Result is the handler's result (Completed; LeaseLost: late, audit
	// only).
	Result Result
	// Checkpoint is the checkpoint to name (Preempted, Blocked): the
	// newest taken in this run, or the one it resumed from.
	Checkpoint *checkpoint.Checkpoint
	Resolution *protocol.Resolution // Blocked
	// Progress is the last report of the run, if any.
	Progress *protocol.Progress
	// Reason and Evidence explain a failure (work.fail).
	Reason   string
	Evidence []protocol.Evidence
	Err      error
	// Attempts counts the attempts of this run; Usage is what the run
	// consumed in the six dimensions.
	Attempts uint64
	Usage    protocol.Usage
	EndedAt  time.Time
}
