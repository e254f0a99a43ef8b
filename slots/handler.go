package slots

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// Handler is a plugin that does one kind of work (DESIGN §6). Run is called
// once per attempt with the slot's own Work handle; it should return at a
// safe point soon after w.PreemptRequested() closes or ctx ends.
type Handler interface {
	// Capability is the capability id and semantic version it provides.
	Capability() protocol.Capability
	Run(ctx context.Context, w *Work) (Result, error)
}

// Clarifier is a Handler that can tell, before its worker accepts an
// offer, what in a Work Contract it cannot act on without guessing: an
// essential ambiguity (spec 10.1). The worker then raises the questions in
// the WorkItem's conversation and does not accept the item; the
// coordinator answers with a corrected contract in a new offer. No
// questions: nothing is ambiguous. Clarify must be quick and pure: it runs
// in the worker's decision loop.
type Clarifier interface {
	Clarify(c protocol.WorkContract) []string
}

// Result is what a finished handler hands over for work.submit.
type Result struct {
	Artifacts []string            // digests returned by Work.PublishArtifact
	Evidence  []protocol.Evidence // mapped to the contract's acceptance criteria
	Progress  *protocol.Progress  // optional final report
	// Preempted says the handler yielded at a safe point after a
	// checkpoint; the same as returning ErrPreempted.
	Preempted bool
}

var (
	// ErrPreempted is returned by a handler that checkpointed and yielded
	// after a preemption request.
	ErrPreempted = errors.New("slots: preempted at a safe point")
	// ErrBlocked is returned by Work.Block; the handler returns it.
	ErrBlocked = errors.New("slots: blocked")
	// ErrEnded is returned by Work methods once the run is over for the
	// handler: it was cancelled, blocked, or its attempt returned.
	ErrEnded = errors.New("slots: the run has ended")
	// ErrNoFreeSlot is returned by Start when every slot is busy.
	ErrNoFreeSlot = errors.New("slots: no free slot")
	// ErrNoRun is returned for a slot index and lease id that name no
	// running execution.
	ErrNoRun = errors.New("slots: no such run")
	// ErrClosed is returned by a pool that is shutting down.
	ErrClosed = errors.New("slots: pool is closed")
)

// permanent marks an error the retry policy must not retry.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so the attempt that returns it is not retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// retryable reports whether a failed attempt may be retried: not when the
// handler said so, nor for refusals that a retry cannot change.
func retryable(err error) bool {
	var p permanent
	if errors.As(err, &p) || errors.Is(err, checkpoint.ErrCorrupt) {
		return false
	}
	switch protocol.CodeOf(err) {
	case protocol.CodeBudgetExceeded, protocol.CodeAuthForbidden, protocol.CodeWorkLeaseExpired,
		protocol.CodeWorkStaleOwnership, protocol.CodeInvalidCommand, protocol.CodeApprovalRequired:
		return false
	}
	return true
}

// Transient reports whether err, returned by a Work method (Publish,
// FetchArtifact, ...), is an answer that may change if the same request is
// made again unchanged later — a *protocol.Error the host marks retryable
// (spec 19: BACKPRESSURE, RATE_LIMITED, INTERNAL_ERROR), such as the
// authority being unreachable for the whole of the worker's offline grace
// (details.reason "authority-unreachable") — and the wait it suggests
// (details.retryAfterMs; 0 when none). Anything else is a refusal or a
// failure no repeat changes. A handler may ask again, checkpoint and
// yield, or return the error: the attempt then fails and the contract's
// retry policy runs another.
func Transient(err error) (wait time.Duration, ok bool) {
	var pe *protocol.Error
	if !errors.As(err, &pe) || !pe.Retryable || !pe.Code.Retryable() {
		return 0, false
	}
	switch ms := pe.Details["retryAfterMs"].(type) {
	case int64:
		wait = time.Duration(ms) * time.Millisecond
	case float64:
		wait = time.Duration(ms) * time.Millisecond
	}
	return max(wait, 0), true
}

// Slot names one execution in one slot: what the host needs to address
// its commands (every one names the lease).
type Slot struct {
	Index          int
	GroupID        string
	MissionID      string
	WorkItemID     string
	OwnershipEpoch uint64
	LeaseID        string
	// Capability is what the running handler provides: the relevant
	// capability version an artifact's manifest records (spec 13.1).
	Capability protocol.Capability
}

// Artifact is one output a handler publishes. MediaType and Data are
// required; the rest goes into the signed manifest (spec 13.1): Schema of
// the content, its data Classification (empty: the host's default) and the
// versions of the tools or models that made it (the host adds the
// capability's own).
type Artifact struct {
	MediaType      string
	Schema         string
	Data           []byte
	Classification protocol.Classification
	ToolVersions   map[string]string
}

// Credentials are scoped to one execution lease; they never outlive it.
type Credentials struct {
	Token     string
	ExpiresAt time.Time
}

// Assignment is one WorkItem to run: the ownership and execution lease the
// authority granted, the contract, and the Mission context package.
type Assignment struct {
	GroupID        string
	MissionID      string
	WorkItemID     string
	OwnershipEpoch uint64
	LeaseID        string
	LeaseExpiresAt time.Time
	Contract       protocol.WorkContract
	// Context is the Context Package of this WorkItem (spec 13.3), its JSON
	// document (or empty). Start refuses one scoped to another Group,
	// Mission or WorkItem.
	Context []byte
	// CitedEvents reads events of the range a context package cites, as
	// the worker's membership allows (the runtime: queue.Store.CitedEvents);
	// nil when the host offers none.
	CitedEvents func(ctx context.Context, r protocol.EventRange, max int) ([]json.RawMessage, error)
	// Extensions are the extensions the offer (or the contract revision)
	// carried, as the authority relayed them (spec 18): the data of the
	// profiles this worker interprets.
	Extensions  protocol.Extensions
	Credentials Credentials
	// Attempts made under earlier acceptances (WorkItem.attempts less
	// the current one); the retry policy counts from there, and the
	// first attempt of a first acceptance is 1.
	PriorAttempts uint64
}

// Risk describes one tool operation for the host's policy; offline, only
// reversible, internal, below-high-risk work may run (spec 11.5).
type Risk struct {
	Class             protocol.RiskClass
	Irreversible      bool
	ExternallyVisible bool
}

// AllowedOffline reports whether an operation of risk r may run while the
// authority is unreachable: not high or critical risk, not irreversible,
// not externally visible. An unknown class is refused.
func (r Risk) AllowedOffline() bool {
	return r.Class.Known() && r.Class.Rank() < protocol.RiskHigh.Rank() && !r.Irreversible && !r.ExternallyVisible
}

// Op is one external tool operation of a handler.
type Op struct {
	// ID is stable across retries of the same operation: it derives the
	// idempotency key, so a repeated ID returns the first result.
	ID         string
	Tool       string // must be in the contract's allowedTools
	Operation  string // must be in the contract's allowedOperations
	Risk       Risk
	SideEffect bool // counts against the sideEffects budget (implied by Irreversible or ExternallyVisible)
	// Cost is charged when the call runs; one toolCall (and one
	// sideEffect when applicable) is added to it.
	Cost protocol.Usage
}

// Ledger runs an operation at most once per idempotency key and returns
// the recorded result on a repeat. toolkeys.Ledger fits through an adapter
// (LedgerFunc). call receives the operation key and the attempt number.
type Ledger interface {
	Do(ctx context.Context, op toolkeys.Op, call func(ctx context.Context, key string, attempt uint64) ([]byte, error)) ([]byte, error)
}

// LedgerFunc adapts a function to Ledger.
type LedgerFunc func(ctx context.Context, op toolkeys.Op, call func(ctx context.Context, key string, attempt uint64) ([]byte, error)) ([]byte, error)

// Do calls f.
func (f LedgerFunc) Do(ctx context.Context, op toolkeys.Op, call func(ctx context.Context, key string, attempt uint64) ([]byte, error)) ([]byte, error) {
	return f(ctx, op, call)
}

// Host is what a slot needs from the runtime; the slot itself never
// touches the network. Implementations must be safe for concurrent use:
// slots call it in parallel.
type Host interface {
	// Progress forwards a structured report (spec 11.4).
	Progress(ctx context.Context, s Slot, p protocol.Progress) error
	// Checkpointed says a durable checkpoint exists. It is not a
	// work.checkpoint by itself: that command releases the lease, and the
	// host sends it for a Preempted outcome.
	Checkpointed(ctx context.Context, s Slot, c checkpoint.Checkpoint) error
	// PublishArtifact stores a.Data content-addressed and returns its digest.
	PublishArtifact(ctx context.Context, s Slot, a Artifact) (string, error)
	// Allow asks policy whether an operation of risk r may run now (for
	// example: refused while offline unless r.AllowedOffline()).
	Allow(ctx context.Context, s Slot, r Risk) error
	// Remaining is the budget left for the WorkItem before this run's own
	// usage (for example the Mission's remaining budget); nil members are
	// uncapped.
	Remaining(ctx context.Context, s Slot) (protocol.Budgets, error)
	// Finish receives the one Outcome of a run, after its slot is free;
	// it may call Pool.Start. It sends work.checkpoint (Preempted),
	// work.block (Blocked), work.submit (Completed) or work.fail (Failed),
	// and nothing current for LeaseLost.
	Finish(o Outcome)
}
