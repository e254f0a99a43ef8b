package slots

import (
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// OutcomeKind is how a run ended: protocol.RunEnd, the one enumeration
// the worker's item lifecycle decides on too.
type OutcomeKind = protocol.RunEnd

// The outcomes of a run (protocol.RunEnd tells what each calls for).
const (
	Completed = protocol.RunCompleted // the handler returned a result
	Preempted = protocol.RunPreempted // the handler yielded at a checkpoint
	Blocked   = protocol.RunBlocked   // the handler called Work.Block
	Failed    = protocol.RunFailed    // beyond its retry policy, or cancelled
	LeaseLost = protocol.RunLeaseLost // the host said the lease was lost: any result is late
)

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
