// Package slots runs handlers in isolated execution slots: each slot sees only
// its own Mission context, lease-scoped credentials, checkpoint namespace,
// tool budget and side-effect keys (spec 11.1, 11.3).
//
// # Handlers
//
// A Handler is a Go value with a capability (id and semantic version) and
// Run(ctx, *Work). Exec adapts an external program speaking JSON lines on
// stdin/stdout (EXTERNAL.md) to the same interface. A Pool picks the
// handler for the first required capability of the contract that some
// handler provides in a satisfying version (VersionSatisfies).
//
// The Work handle is the whole API of a handler: Contract and Context
// (copies), Credentials (expire with the lease at the latest), Workdir (a
// private directory, removed after the run), Progress (structured, spec
// 11.4), Checkpoint (durable save through package checkpoint under the
// slot's own (group, item, ownership epoch), then the host is told),
// Resume (the newest checkpoint of the WorkItem when the attempt began),
// PreemptRequested, Block, ToolCall, Charge, and Publish (an Artifact with
// its schema, classification and tool versions; PublishArtifact for bytes
// of one media type).
//
// A Work method whose request may succeed if made again unchanged later
// returns a retryable *protocol.Error: Transient reports it and the wait it
// suggests, and an external handler reads the same in the error message's
// retryable and retryAfterMs (EXTERNAL.md "Errors"). The worker of `run
// --authority` gives that answer to Publish and FetchArtifact only after
// waiting out an unreachable authority for its offline grace; a shorter
// outage only makes the call take longer. A handler may ask again,
// checkpoint and yield, or return the error, which fails the attempt for
// the retry policy to run again.
//
// ToolCall checks, in order: the lease and credentials; the contract's
// allowedTools and allowedOperations (AUTH_FORBIDDEN); the host's policy
// for the operation's Risk (offline: Risk.AllowedOffline); then derives
// the toolkeys key from (mission, item, epoch, operation id) and goes
// through the Ledger. Each real execution charges the six-dimension usage
// first and is refused with BUDGET_EXCEEDED when the contract's budgets
// or the host's remaining budget would be exceeded.
//
// # Runs and outcomes
//
// Pool.Start runs one assignment in a free slot; every run ends with one
// Outcome passed to Host.Finish after the slot is free: Completed,
// Preempted (with the checkpoint to name in work.checkpoint), Blocked,
// Failed (with evidence for work.fail) or LeaseLost (a late result, for
// audit only). A failed attempt is retried in the same slot while the
// contract's retryPolicy allows (DecideRetry, a pure function of policy,
// attempt, money spent, time and deadline); the backoff runs on the
// injected clock.
//
// Preemption is cooperative: Preempt closes PreemptRequested and the
// handler checkpoints and returns ErrPreempted at its next safe point.
// Supervision (Tick, paced by a ticker or called by tests with a fake
// clock; the decision is the pure supervise) cancels a run's context when
// its lease expires, its wall-clock budget runs out, it ignores a
// lease-loss request past Config.PreemptTimeout, or an attempt passes
// attemptTimeoutMs (that one is retried). A preemption or shutdown request
// never cancels a run: active work is not interrupted at an unsafe point
// (spec 11.3); Shutdown cancels only when its context ends. A cancelled run
// is Failed whatever its handler then returns, and its slot stays taken
// until the handler has actually returned.
//
// The slot never touches the network: everything external goes through
// the Host interface, which the runtime implements.
package slots
