// Package runtime is the running worker: it opens the session, decides what
// to accept and run, renews leases, goes offline and reconciles, and wires
// queue, scheduler, slots, offline, checkpoint and toolkeys together. The
// connection to the authority is package runtime/client; runtime drives one
// client.Client and feeds its engine from the client's callbacks.
//
// Worker (NewWorker, Run, AddGroup, Status) is the running worker. Run
// opens the store (queue.Open(Dir)) and, on its bbolt file, the checkpoint
// store, the tool-key ledger and the offline buffer; then it opens a
// session (spec 11.3): a bootstrap client.Client connects under the last
// session epoch (Dir/session.json; an AUTH_STALE_SESSION answer carries
// the current one in details.sessionEpoch and is used instead), registers the
// signed Agent Card and sends session_open for the next epoch, which
// revokes the leases of the previous session; the main client then
// connects under the new epoch, which is saved. Commands a previous run
// left in the outbox are resent while their session is still current
// (before session_open) and dropped after. An agent the authority
// does not know cannot HELLO at all (the binding has no other way in), so
// its first registration goes out of band: WorkerConfig.Enroll (the
// embedded authority submits it in process) or `authority serve --enroll`.
//
// What an item's lifecycle calls for is decided by package runtime/item,
// pure: lc.Step(item, input, now) → (item, effects). The engine feeds it
// the store's view of an item after each transaction (sync), an offer
// with what admission judges it on (admit) and a revised contract
// (renewAcceptance), the scheduler's picks and preemptions (schedule),
// the time on every loop turn (tick: renewals, lease ends, the offline
// grace, preemptions refused), each command's answer (onSent), the lease
// granted for a start and a start the slot refused (launch), each run's
// outcome (onOutcome), the outcomes held while offline (onReconciled)
// and each command about to be sent (pump: the waits for a membership
// epoch or the item's own events, the withheld outcome), and carries out
// the effects (worker_effects.go, worker_admit.go carryAdmission,
// worker_exec.go carryTime); the rules are tabled in runtime/item's doc.go
// and written as scenarios under its testdata. What stays here is I/O.
//
// One goroutine owns the state (worker_engine.go): the scheduler, the
// item records, the offline Monitor and the memberships (the epoch every
// Command carries, from the store's view, which keeps them from membership
// events and restored snapshots). The client's callbacks, the slots
// (through the slots.Host) and the command senders only post messages to
// it. Each applied store transaction is fed to the
// scheduler: an item offered to this agent goes to admission control
// (lc.Admission.Decide, pure: authorization, capability via protocol.VersionSatisfies,
// capacity, deadline, dependency, budget, in spec 10.3's order) with the
// disclosure of scheduler.Disclose. Budget covers all six dimensions: the
// contract's budget must cover the item's expected cost (WorkerConfig.Costs
// summed over its required capabilities; wall-clock from the estimate),
// and WorkerConfig.Limits must cover it on top of what the accepted,
// unfinished items hold; a refusal names the dimension, and a capacity or
// budget refusal is judged again when a commitment ends. Accepted,
// work.accept_offer is sent
// and the item waits, gated, in the scheduler; refused, the structured
// reason {reason, detail} is logged, kept in Status and posted to the Group
// (below). Owned queued items are enqueued with their urgency, impact,
// deadline, dependencies, risk gate and the authority's enqueue time;
// changes update them; items no longer ours are removed, and a running one
// whose lease the projection no longer shows gets Pool.LeaseLost.
//
// A substantial contract revision (work.contract.revised, a dependency
// insertion) of an owned item not yet started needs a renewed acceptance
// (spec 10.1): the item is held, admission control judges the revised
// contract again (Renewal: the ownership is the authorization, capacity
// is already counted), and work.accept_offer goes out again for the
// offer it won with the new revision; the hold ends when the authority
// records it. A revision it refuses releases the item: work.fail naming
// the refusal, by ownership epoch (a queued item has no lease), and the
// refusal posted like an offer's. A work.start refused as
// renewed_acceptance_required (a snapshot does not carry the accepted
// revision) renews the same way. The authority never revises the contract
// of an active item.
//
// When a slot is free and the Monitor allows starting, scheduler.Next
// picks; work.start names the last checkpoint when this worker has it; the
// work.started event's lease starts the handler (Pool.Start) with a
// credential bound to the lease id and expiring with it (an HMAC of lease
// id and expiry, rotated on renewal). Leases are renewed at half their
// remaining time (lc.RenewAt) with the handler's last structured progress; a
// renewal refused with WORK_LEASE_EXPIRED or WORK_STALE_OWNERSHIP is
// Pool.LeaseLost. scheduler.Preempt names victims; Pool.Preempt asks them
// for a safe point. A victim that reaches none within PreemptTimeout is not
// interrupted (spec 11.3): it keeps its slot and lease, the refusal goes
// to scheduler.RefusePreempt (it is not asked again during that run, the
// waiting item takes the next slot that frees), to Status (refusedAt) and
// to a WARN log naming both items; only a lost lease (cancellation,
// fencing, revocation), its own lease expiry or a shutdown past
// DrainTimeout stop it. Offline, a reversible run's slot lease is
// extended to its grace deadline, so supervision ends it there and not at
// the lease expiry the authority cannot extend meanwhile. Outcomes: Completed sends work.submit with the
// handler's artifacts and evidence; Preempted sends work.checkpoint
// (reason preempted) and only then releases the scheduler slot, which
// goes to the item the preemption was for; Blocked sends work.block,
// Failed work.fail, LeaseLost nothing. Each item's commands go out in
// order, one at a time (a publish lands before the submit that releases
// the lease), signed when first sent with the current epochs; a WorkItem
// state command carries expectedRevision from the projection (spec 15.3),
// once the item's own previous command is applied to it
// (worker_revision.go). Answers (worker_answers.go): INTERNAL_ERROR and a
// send that lost its answer are retryable (spec 19), the same bytes go
// again after a back-off (retryBackoff), so an acceptance is never taken
// for a refusal; a command the client did not send within its freshness
// window (client.ErrStale, commandFreshness) or signed with a stale
// membership epoch, refused as ACTION_ID_COLLISION, or refused for its issuedAt (AUTH_INVALID_SIGNATURE at
// /issuedAt: the worker's clock and the authority's disagree by more than
// its skew), is built again with a new actionId, issuedAt and signature
// (the last after a back-off, until the clocks agree) (a rebuilt work.start refused because the first was applied
// after all: the store shows the item active under a lease of this
// session, which the worker adopts and runs under, worker_sync.go
// adoptable); a REVISION_CONFLICT waits until the projection has the
// current revision and decides again (still applicable: built on it; not:
// settled as that refusal). A refused work.submit is decided: refused
// while the lease is ours (no artifacts, evidence short of the acceptance
// criteria), the run fails with the refusal as its reason, releasing the
// item; fenced, or once the worker's own clock has ended the lease, the
// run stops and nothing more is sent (a submission, block or failure about
// to go out under such a lease is withheld, as is a held outcome sent
// after reconciliation); refused for its state (or a conflict after
// which it no longer applies), it has moved on.
// Status outcomes carry the decision.
//
// Notices (worker_notice.go): 0.1 has no refusal command (spec 15), so a
// refusal (spec 10.3) and a material schedule change of an accepted item
// (spec 11.2) are told to the Group as a message.post in the item's
// conversation (conversationId = the WorkItem id), text/markdown: one human
// line, then a fenced json block with the JCS bytes of
// {kind: "admission.rejection", groupId, workItemId, offerId, reason, detail}
// or {kind: "schedule.disclosure", groupId, workItemId, ...ScheduleDisclosure}
// or {kind: "contract.ambiguity", groupId, workItemId, offerId,
// contractRevision, questions} — the questions a handler that implements
// slots.Clarifier or slots.OfferClarifier (asked off the loop: an
// external program, --handler-clarify) raised about an offered contract (spec 10.1: an
// essential ambiguity is raised before acceptance; the offer is not
// accepted, and only a new offer or revision is judged again);
// the same object rides as the non-critical command extension
// NoticeExtensionURI. A refusal is posted once per offer: its messageId
// and actionId derive from (agent, Group, offer), and a durable record
// (notices bucket of the store) is written pending before the send, so an
// offer judged again after a restart posts nothing and a notice cut short
// by a crash is sent again under the same ids (the authority answers a
// used actionId, never posting twice). Disclosures come from the queue and
// what the worker observed (worker_observe.go): each capability's
// completed run durations give its items' estimates and the runs they
// rest on (scheduler.Item.Observed, the confidence), the time from a pick
// to its lease is the start latency that widens every start window
// (Scheduler.SetStartLatency; one Tick until a start is observed), and a
// completed run updates the waiting items' estimates. The disclosure sent in
// work.accept_offer is the item's baseline; after every scheduling
// decision that can reorder the queue (enqueue or update, removal, a pick,
// a preemption, a slot freed, back online) each accepted item not yet
// started is disclosed again, and a MaterialChange against the baseline
// is posted, at most once per item per DisclosureThreshold (a change
// within it waits until it has passed). Disclose reads only the item's own
// Group and aggregate load, and a detail naming another Group the worker
// serves is withheld, so no notice names another Group. Notices are
// advice: they use client.Client.SendAdvisory, stay within the worker's own
// budget (NoticeBurst, NoticeEvery: a sixth of authority-lite's default
// rate), wait for the connection, and one the authority refuses
// (RATE_LIMITED included) is dropped and logged, never retried. Status
// lists them (Notices: pending, posted, dropped, skipped).
//
// Artifacts: with WorkerConfig.Artifacts (the embedded authority's
// PutArtifact, or `run --authority`'s upload over the authority's HTTPS
// artifact route) the bytes go to the authority's store and a signed
// manifest is published (artifact.publish, "mwp-artifact:" URI). Without
// it the bytes stay in Dir/artifacts with a file:// URI and no manifest is
// published: authority-lite refuses a manifest whose content it lacks;
// work.submit still names the digests. The manifest's sources are the
// contract's inputs, its tool versions the handler's plus the capability
// that ran, its classification at least WorkerConfig.Classification.
// The upload runs in the handler's call (Work.Publish), under its context:
// `run --authority` waits out an unreachable authority there, within the
// offline grace, and the handler gets the hook's error as is (a retryable
// *protocol.Error past the grace, slots.Transient).
//
// Offline (package offline): a disconnect stops new starts; renewals due
// are signed with the offline binding (usage delta: the wall-clock time
// since the last report) and appended to the durable buffer, as is the
// checkpoint of a run paused ahead of its grace deadline or by a full
// buffer; submissions, blocks and failures wait in memory. On reconnect
// every buffered command is rebased on the current session, sent in order
// and settled by offline.Classify; only then is the worker online again.
//
// Shutdown (ctx ends): no new work, every slot asked for a safe point, the
// checkpoints sent, then the connection closed; DrainTimeout bounds it. A
// replaced session (AUTH_STALE_SESSION on HELLO or on a command) drains the
// same way and Run returns an error wrapping client.ErrSessionReplaced.
//
// An authority in the same process (authority-lite/embed, which serves
// authority-lite over wss on a loopback port with its self-signed
// certificate) is used through WorkerConfig.UseInProcess: the worker still
// connects over real wss with the certificate pinned, the same path as a
// remote authority. runtime never imports authority-lite; its end-to-end
// tests do.
//
// Not done yet: presence records; detecting a replaced session from a
// session_opened event (the server does not stream Organization events);
// re-signing Commands left in the outbox from an older session (past
// their freshness window they are dropped, never sent stale); a
// Mission's budget before the authority's (Host.Remaining reports no cap);
// observed durations kept across restarts; expectedRevision on offline
// buffered commands (reconciliation classifies them instead).
package runtime
