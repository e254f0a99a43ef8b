package item

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Effect is what Step asks the engine to carry out, in the order given.
// Step has already changed the Item it returns; the engine stores it
// before carrying out the effects.
type Effect interface{ effect() }

// Answers and commands.
type (
	// Again keeps the command at the head of the chain and sends it once
	// Wait has passed: the same signed bytes (spec 19: a command the
	// authority did apply is answered with its first receipt), or, with
	// Rebuild, built again with a new actionId, issuedAt and signature.
	Again struct {
		Rebuild bool
		Wait    time.Duration // 0: at once
		Tries   int           // the command's tries from now on
		// StaleMembership is an epoch the authority called stale: the
		// command waits for a newer one.
		StaleMembership uint64
		Why             string // membership, collision, stale, issuedAt, retryable
	}
	// HoldConflict keeps a command refused with REVISION_CONFLICT until
	// the projection has the current revision, then decides again.
	HoldConflict struct{}
	// Settled takes the answered command off the head of the chain.
	Settled struct{}
	// Unanswered: the send ended without an answer while the worker
	// stops; nothing was refused and the command stays in the outbox.
	Unanswered struct{}
	// Applied records the events the command's receipt names.
	Applied struct{}
	// Refused logs a refusal.
	Refused struct{ Code protocol.Code }
	// SessionReplaced stops the worker: another session took its place.
	SessionReplaced struct{}
	// Fenced counts a refusal for a lease or ownership that is gone.
	Fenced struct{ Code protocol.Code }
	// Send appends a command to the item's chain.
	Send struct {
		Type    protocol.CommandType
		Payload any
	}
	// Withhold drops the head command unsent: it names a lease that has
	// ended by the worker's clock.
	Withhold struct{ Why string }
	// Next sends the item's next command, or forgets a finished item
	// whose commands are all answered.
	Next struct{}
)

// Offers and acceptances.
type (
	// AdmissionRefused records the authority's refusal of an acceptance.
	AdmissionRefused struct{}
	// RefuseOffer remembers the offer as refused: it is not judged again.
	RefuseOffer struct{ OfferID string }
	// RenewalRefused logs a renewed acceptance the authority refused.
	RenewalRefused struct{ Revision uint64 }
)

// The scheduler and the record.
type (
	// Drop forgets a waiting item, once its commands are answered.
	Drop struct{}
	// Forget removes the item's record.
	Forget struct{}
	// Sync reconciles the item with the store's view again; IfForgotten:
	// only when the record is gone.
	Sync struct{ IfForgotten bool }
	// EndRun tells the scheduler the run is over: finished, or with
	// Requeue back to its queue.
	EndRun struct{ Requeue bool }
	// HoldGate keeps the queued item from starting until its view changes.
	HoldGate struct{}
	// ReleaseAfterCheckpoint hands the preempted run's slot over: its
	// checkpoint is emitted.
	ReleaseAfterCheckpoint struct{}
)

// Runs and leases.
type (
	// RenewAnswered records a lease.renew's answer (counted, next try).
	RenewAnswered struct{ OK bool }
	// LoseLease stops the run at its next safe point.
	LoseLease struct{ Why string }
	// Late logs a run that ended with its lease: its result is not sent.
	Late struct{}
	// Track counts a run ended (Success: a submission accepted) for the
	// reliability of later selection bases.
	Track struct{ Success bool }
	// ObserveRun records a completed run's duration for estimates.
	ObserveRun struct{}
	// Checkpoint sends (offline: buffers) work.checkpoint for a preempted
	// run, with the checkpoint the run names or a new empty one.
	Checkpoint struct{}
	// Block sends work.block with the run's checkpoint and Resolution.
	Block struct{}
	// HoldOutcome keeps the outcome until the worker is reconciled.
	HoldOutcome struct{}
	// ReleaseOffline ends the offline monitor's hold on the lease.
	ReleaseOffline struct{}
	// Outcome is the run's end as Status records it: what was sent.
	Outcome struct {
		End  End
		Sent string
	}
	// Decided records what a refused command led to (Status).
	Decided struct {
		Type     protocol.CommandType
		Decision string
	}
	// LogSent records an answered command in Status.
	LogSent struct{}
	// PublishRefused logs a refused artifact.publish.
	PublishRefused struct{}
)

func (Again) effect()                  {}
func (HoldConflict) effect()           {}
func (Settled) effect()                {}
func (Unanswered) effect()             {}
func (Applied) effect()                {}
func (Refused) effect()                {}
func (SessionReplaced) effect()        {}
func (Fenced) effect()                 {}
func (Send) effect()                   {}
func (Withhold) effect()               {}
func (Next) effect()                   {}
func (AdmissionRefused) effect()       {}
func (RefuseOffer) effect()            {}
func (RenewalRefused) effect()         {}
func (Drop) effect()                   {}
func (Forget) effect()                 {}
func (Sync) effect()                   {}
func (EndRun) effect()                 {}
func (HoldGate) effect()               {}
func (ReleaseAfterCheckpoint) effect() {}
func (RenewAnswered) effect()          {}
func (LoseLease) effect()              {}
func (Late) effect()                   {}
func (Track) effect()                  {}
func (ObserveRun) effect()             {}
func (Checkpoint) effect()             {}
func (Block) effect()                  {}
func (HoldOutcome) effect()            {}
func (ReleaseOffline) effect()         {}
func (Outcome) effect()                {}
func (Decided) effect()                {}
func (LogSent) effect()                {}
func (PublishRefused) effect()         {}
