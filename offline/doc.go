// Package offline implements bounded offline execution (spec 11.5): the grace
// window, the bounded durable buffer of signed commands and their rebase and
// re-signing on reconnect, and the authority's pure check of a buffered
// command against the historical lease.
//
// # The window (pure)
//
// A Monitor is fed Connected, Reconciled, Disconnected, Heard, PingTimedOut,
// SetLease and Release, each with the time, and answers MayStart, MayRun,
// AllowOperation, GraceDeadline and Binding. States: Offline (also at process
// start), Reconciling (connected, buffer not yet settled), Online. Only Online
// may start work or run high-risk, irreversible or externally visible
// operations (a submission is externally visible): spec 11.5 wants
// reconciliation before submission or further side effects. A PING timeout
// dates the loss at the last frame heard.
//
// Grace: reversible active work may run until its lease expiry plus Grace
// (Config; DefaultGrace two minutes, one authority-lite lease term, and never
// more than MaxGrace, ten minutes — the spec asks for "a bounded grace" and
// names no figure). Work whose lease had already expired when the authority
// was lost gets no grace, nor does irreversible work: it stops at its expiry.
// A checkpoint must be buffered before the deadline (Binding refuses at or
// after it), so the runtime asks for a safe point ahead of it.
//
// # The buffer (bbolt, inside the worker's store)
//
//	offline/                 (a top-level bucket; queue reserves it)
//	|--> meta/    schema -> uint64 BE 1; count, bytes -> uint64 BE
//	|--> entries/ uint64 BE append order -> uvarint(len hdr) hdr(JSON) signed bytes
//	|--> rebased/ uint64 BE append order -> uvarint(len hdr) hdr(JSON) rebased bytes
//	|--> index/   actionId -> uint64 BE append order
//
// Every Append, Prepare and Remove is one fsync'd bbolt commit; the counters
// change in the same transaction as the entries, so the bounds (Limits:
// commands and signed bytes) hold across crashes. At a bound Append returns
// ErrFull and stores nothing: the caller pauses the slot and keeps the
// command. Append validates what the authority would before looking at state
// (strict JSON, signer key, epoch rules, command schema including the
// binding's, critical extension, BindingOf), so nothing malformed is kept.
//
// # Rebase and the actionId
//
// Prepare rebases an entry onto the current session (issuedAt, sessionEpoch,
// membershipEpoch; binding, payload and everything else unchanged), re-signs
// it, persists the bytes and only then returns them. Within one session and
// for ReuseRebasedFor it returns the persisted bytes again, so a resend after
// a lost receipt is byte-identical and gets the original receipt.
//
// The actionId never changes. Spec 15.1 applies an (actor, actionId) at most
// once and answers other content under a used actionId with
// ACTION_ID_COLLISION; the offline original is never sent, so each rebase is
// the only content the authority can have seen for it. After a second
// disconnect a rebase under the new session either is accepted (the earlier
// one never was) or collides (it was, and its receipt was lost): Classify
// maps both to Applied. A new actionId per rebase would charge twice.
//
// Entries are removed only after the authority answered for good:
//
//	receipt, ACTION_ID_COLLISION                  Applied  Remove
//	WORK_LEASE_EXPIRED, WORK_STALE_OWNERSHIP,
//	BUDGET_EXCEEDED, INVALID_COMMAND, ...         Refused  Remove, report
//	BACKPRESSURE, RATE_LIMITED, INTERNAL_ERROR,
//	a broken connection                           Resend   same bytes
//	AUTH_REQUIRED, AUTH_STALE_SESSION,
//	MEMBERSHIP_STALE, stale issuedAt              Retry    Prepare again
//
// One goroutine should reconcile, in Pending order.
//
// # The authority's side
//
// For a command carrying the binding the authority calls BindingOf (ties the
// binding to actor, Group, type and payload lease; a usage record must charge
// exactly the binding's delta) and CheckBuffered with the historical lease
// instead of the live-lease check, then — in one transaction — appends a
// resource_usage_recorded event for a non-zero usageDelta (NonZeroDimensions
// lists its dimensions), charges the budget ancestry, and applies the
// progress or checkpoint; a budget overflow rejects all of it
// (BUDGET_EXCEEDED, no partial event). A buffered message.post is checked
// by CheckBufferedMessage too: it must be in its WorkItem's conversation
// (and reply only within it). It should answer a byte-identical
// retry with its receipt before the freshness and epoch checks; if it checks
// them first, the worker's re-signed retry collides and is still settled
// once.
package offline
