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
//     inReplyTo; details.groupId is used when inReplyTo is absent.
//  3. Every Command still in the durable outbox is sent again, in put
//     order, with its original bytes, before any new one.
//
// EVENT frames are decoded and their signatures verified (AuthorityKeys)
// on the reader goroutine; the loop takes the events already waiting, up to
// MaxBatch, into one queue.Store.Apply (group commit), which routes them by
// groupId before any sequence logic and dedupes by eventId and sequence.
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
// RetryDelay). A BACKPRESSURE frame holds back the Commands of its Group
// only, for retryAfterMs (at most ten minutes). If the connection drops,
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
// Status: the connection client above is implemented and tested over
// loopback against an in-test fake authority and against
// authority-lite/wss with a fake Backend (TLS with a pinned certificate).
// Not yet: the `run` daemon wiring of queue, scheduler, slots, offline and
// checkpoint; lease renewal; detecting a replaced session from a
// session_opened event (Result.Org is passed to OnApplied for that);
// re-signing outbox Commands for a new session epoch (package offline);
// SUBSCRIBE filters.
package runtime
