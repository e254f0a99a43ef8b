// Package runtime is the worker process: its session and WebSocket client,
// per-Group subscribe/replay/ACK, command sending with stable action ids, lease
// renewal, and the wiring of queue, scheduler, slots, offline and checkpoint.
//
// # The connection to the Group Authority (Client)
//
// One Client keeps one WebSocket (spec 17) to the authority for every Group
// of the worker. Run dials wss:// (TLS 1.3 only; the certificate checked
// against the system roots, a PEM file, or a pinned "sha256:" fingerprint
// of the leaf, see Trust), or ws:// to a loopback address when
// Config.AllowInsecureLoopback is set. Then, on every connection:
//
//  1. HELLO with protocolVersions ["0.1"], agentId, sessionEpoch and a proof
//     {agentId, sessionEpoch, nonce, issuedAt} signed with the agent's key;
//     the nonce is 256 fresh random bits. An ERROR AUTH_STALE_SESSION ends
//     Run with ErrSessionReplaced (state SessionReplaced: the runtime stops
//     its slots at a safe point); UNSUPPORTED_VERSION ends it too; other
//     HELLO errors are retried.
//  2. One SUBSCRIBE per Group (configured, added with AddGroup, or known to
//     the store) from the store's durable cursor. One frame per Group lets
//     a GROUP_NOT_FOUND or CURSOR_TOO_OLD answer name its Group by
//     inReplyTo; details.groupId is used when inReplyTo is absent. No
//     attention filter is sent, by design: a filter thins live delivery
//     (spec 17.2), and a Group's durable cursor may only pass contiguous
//     sequences (spec 16), so a filtering worker would stall at its first
//     filtered-out event and replay it every time.
//  3. Every Command still in the durable outbox is sent again, in put
//     order, with its original bytes, before any new one.
//
// Inbound frames are decoded and EVENT signatures verified (AuthorityKeys)
// by DecodeWorkers goroutines (one per CPU, at most 4) and reach the loop in
// arrival order (conn_decode.go); the loop takes the events already
// waiting, up to MaxBatch, into one queue.Store.Apply (group commit), which
// routes them by groupId before any sequence logic and dedupes by sequence
// (and a reused eventId, queue.RecentEventIDs).
// After the transaction commits the client ACKs exactly the cursors Apply
// reports as advanced, so an ACK is never ahead of what is durable. A Group
// left waiting on a gap for GapTimeout, or whose reorder buffer overflowed,
// is re-subscribed from its durable cursor; the authority replays and the
// store drops the duplicates. CURSOR_TOO_OLD with details.snapshot calls
// FetchSnapshot (off the loop), checks and installs the snapshot with
// queue.Store.RestoreSnapshot, ACKs its sequence and re-subscribes after
// it; a failed fetch or check is retried after GapTimeout.
//
// Send(ctx, signed) puts the Command in the outbox (durable) first, sends it
// in a COMMAND frame and waits for the ACK receipt or ERROR answering that
// frame; either removes it from the outbox, and an ERROR is returned as the
// *protocol.Error. RATE_LIMITED and BACKPRESSURE errors are not returned:
// the Command is resent unchanged after details.retryAfterMs (or
// RetryDelay), and its Group's Commands wait as long. SendAdvisory is Send
// for advice (the worker's messages): those two errors are returned and
// pause nothing, so a refused message never holds back work Commands. A
// BACKPRESSURE frame holds back the Commands of its Group only, for
// retryAfterMs (at most ten minutes). If the connection drops,
// Send keeps waiting and the Command is resent after reconnecting; if ctx
// ends first it stays in the outbox and is resent on every connection
// until answered, also after a restart.
//
// Liveness: a PING every PingInterval; without its echo (same nonce,
// reply true) within PingTimeout the connection is closed and redialled.
// The authority's PINGs are echoed. Reconnects wait Backoff.Delay, a pure
// function of the attempt (capped exponential with full or decorrelated
// jitter; the random draw is passed in); the attempt count restarts only
// after a connection that lasted ten seconds.
//
// State changes (connecting, connected with the authority's session epoch
// and clock, disconnected with the cause, session replaced, stopped, and
// rejected Groups) go to Config.OnState; every store transaction's
// queue.Result goes to Config.OnApplied, for the scheduler and offline
// logic. Both are called on the client's goroutine. Run returns when its
// context ends, after a clean WebSocket close and with every goroutine it
// started finished.
//
// The decisions that depend on time are pure and take it as an argument
// (sync.go: Command ordering and pauses, the ping tracker, gap timing);
// timers come from Config.Clock, so tests step a manual clock.
//
// # The Worker
//
// Worker (NewWorker, Run, AddGroup, Status) is the running worker. Run
// opens the store (queue.Open(Dir)) and, on its bbolt file, the checkpoint
// store, the tool-key ledger and the offline buffer; then it opens a
// session (spec 11.3): a bootstrap Client connects under the last session
// epoch (Dir/session.json; an AUTH_STALE_SESSION answer carries the
// current one in details.sessionEpoch and is used instead), registers the
// signed Agent Card and sends session_open for the next epoch, which
// revokes the leases of the previous session; the main Client then
// connects under the new epoch, which is saved. An agent the authority
// does not know cannot HELLO at all (the binding has no other way in), so
// its first registration goes out of band: WorkerConfig.Enroll (the
// embedded authority submits it in process) or `authority serve --enroll`.
//
// One goroutine owns the state (worker_engine.go): the scheduler, the
// item records, the offline Monitor and the memberships. The client's
// callbacks, the slots (through the slots.Host) and the command senders
// only post messages to it. Each applied store transaction is fed to the
// scheduler: an item offered to this agent goes to admission control
// (Admit, pure: authorization, capability via slots.VersionSatisfies,
// capacity, deadline, dependency, budget, in spec 10.3's order) with the
// disclosure of scheduler.Disclose; accepted, work.accept_offer is sent
// and the item waits, gated, in the scheduler; refused, the structured
// reason {reason, detail} is logged, kept in Status and posted to the Group
// (below). Owned queued items are enqueued with their urgency, impact,
// deadline, dependencies, risk gate and the authority's enqueue time;
// changes update them; items no longer ours are removed, and a running one
// whose lease the projection no longer shows gets Pool.LeaseLost.
//
// When a slot is free and the Monitor allows starting, scheduler.Next
// picks; work.start names the last checkpoint when this worker has it; the
// work.started event's lease starts the handler (Pool.Start) with a
// credential bound to the lease id and expiring with it (an HMAC of lease
// id and expiry, rotated on renewal). Leases are renewed at half their
// remaining time (RenewAt) with the handler's last structured progress; a
// renewal refused with WORK_LEASE_EXPIRED or WORK_STALE_OWNERSHIP is
// Pool.LeaseLost. scheduler.Preempt names victims; Pool.Preempt asks them
// for a safe point. Outcomes: Completed sends work.submit with the
// handler's artifacts and evidence; Preempted sends work.checkpoint
// (reason preempted) and only then releases the scheduler slot, which
// goes to the item the preemption was for; Blocked sends work.block,
// Failed work.fail, LeaseLost nothing. Each item's commands go out in
// order, one at a time (a publish lands before the submit that releases
// the lease), signed when sent with the current epochs.
//
// Notices (worker_notice.go): 0.1 has no refusal command (spec 15), so a
// refusal (spec 10.3) and a material schedule change of an accepted item
// (spec 11.2) are told to the Group as a message.post in the item's
// conversation (conversationId = the WorkItem id), text/markdown: one human
// line, then a fenced json block with the JCS bytes of
// {kind: "admission.rejection", groupId, workItemId, offerId, reason, detail}
// or {kind: "schedule.disclosure", groupId, workItemId, ...ScheduleDisclosure};
// the same object rides as the non-critical command extension
// NoticeExtensionURI. A refusal is posted once per offer: its messageId
// and actionId derive from (agent, Group, offer), and a durable record
// (notices bucket of the store) is written pending before the send, so an
// offer judged again after a restart posts nothing and a notice cut short
// by a crash is sent again under the same ids (the authority answers a
// used actionId, never posting twice). The disclosure sent in
// work.accept_offer is the item's baseline; after every scheduling
// decision that can reorder the queue (enqueue or update, removal, a pick,
// a preemption, a slot freed, back online) each accepted item not yet
// started is disclosed again, and a MaterialChange against the baseline
// is posted, at most once per item per DisclosureThreshold (a change
// within it waits until it has passed). Disclose reads only the item's own
// Group and aggregate load, and a detail naming another Group the worker
// serves is withheld, so no notice names another Group. Notices are
// advice: they use Client.SendAdvisory, stay within the worker's own
// budget (NoticeBurst, NoticeEvery: a sixth of authority-lite's default
// rate), wait for the connection, and one the authority refuses
// (RATE_LIMITED included) is dropped and logged, never retried. Status
// lists them (Notices: pending, posted, dropped, skipped).
//
// Artifacts: with WorkerConfig.Artifacts (the embedded authority's
// PutArtifact) the bytes go to the authority's store and a signed manifest
// is published (artifact.publish, "mwp-artifact:" URI). Without it the
// bytes stay in Dir/artifacts with a file:// URI and no manifest is
// published: the binding has no upload frame and authority-lite refuses a
// manifest whose content it lacks; work.submit still names the digests.
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
// same way and Run returns an error wrapping ErrSessionReplaced.
//
// An authority in the same process (authority-lite/embed, which serves
// authority-lite over wss on a loopback port with its self-signed
// certificate) is used through WorkerConfig.UseInProcess: the worker still
// connects over real wss with the certificate pinned, the same path as a
// remote authority. runtime never imports authority-lite; its end-to-end
// tests do.
//
// Status: the Client is tested over loopback against an in-test fake
// authority and against authority-lite/wss. The Worker is tested end to
// end against authority-lite over wss (fake clock): accept, start, renew,
// preemption with checkpoint and resume, submit and acceptance; lease loss
// with the late result kept for audit; disconnect and reconciliation
// within the grace period with usage charged once; pauses at the buffer
// bound and before the grace deadline; restart resuming from the
// checkpoint under the next session epoch, also with a checkpoint left in
// the offline buffer; a replaced session; refusal notices once per offer
// across a restart, schedule updates (material only, one per threshold),
// and a rate-limited notice that holds nothing back; a Group retried until the
// membership exists; and as separate processes (cmd/mwp-worker).
// Commands a previous run left in the outbox are resent while their
// session is still current (before session_open) and dropped after.
// Memberships (the epoch every Command carries) come from the store's
// view, which keeps them from membership events and restored snapshots.
// Not yet: presence records; detecting a replaced session from a
// session_opened event (the server does not stream Organization events);
// re-signing Commands left in the outbox from an older session; a
// Mission's budget before the authority's (Host.Remaining reports no cap).
package runtime
