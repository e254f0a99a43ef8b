package protocol

// RunEnd is how a handler's run ended on a worker. Package slots reports
// it (slots.OutcomeKind) and the worker's item lifecycle decides on it
// (item.End): one enumeration, so the two cannot drift apart. It never
// travels on the wire; the command a run's end calls for does.
type RunEnd int

// The ends of a run.
const (
	// RunCompleted: the handler returned a result: work.submit.
	RunCompleted RunEnd = iota + 1
	// RunPreempted: the handler yielded at a checkpoint: work.checkpoint,
	// and the item re-enters its Group queue.
	RunPreempted
	// RunBlocked: the handler called Block: work.block.
	RunBlocked
	// RunFailed: the handler failed beyond its retry policy, or was
	// cancelled (hard timeout, lease expiry, budget): work.fail. Never a
	// success, whatever the handler returned.
	RunFailed
	// RunLeaseLost: the lease was lost. Any result is late: it may be kept
	// for audit but must not complete the WorkItem; nothing is sent.
	RunLeaseLost
)

func (k RunEnd) String() string {
	switch k {
	case RunCompleted:
		return "completed"
	case RunPreempted:
		return "preempted"
	case RunBlocked:
		return "blocked"
	case RunFailed:
		return "failed"
	case RunLeaseLost:
		return "lease-lost"
	}
	return "unknown"
}
