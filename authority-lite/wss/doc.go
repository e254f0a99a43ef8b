// Package wss serves the MissionWeaveProtocol 0.1 WebSocket binding (spec
// 17, docs/wire.md "Frames") in front of a Group Authority, the Backend.
//
// # Connections
//
// NewServer(b, opts).Handler() accepts upgrades at /mwp (subprotocol
// "mwp-0.1" is selected when offered, never required). Listen opens a TLS
// 1.3 listener with a certificate from LoadOrCreateCert (self-signed,
// kept in a directory, pinned by clients through its "sha256:" fingerprint
// with ClientTLSConfig); plain ws needs ListenOptions.InsecureLoopback and
// is refused for any non-loopback address.
//
// Each connection is one session, a state machine (session.go) that turns
// a message into replies and work:
//
//   - The first frame must be HELLO. Its checks run in order: frame shape
//     (PROTOCOL_VIOLATION), protocol version (UNSUPPORTED_VERSION unless
//     "0.1" is offered), the proof naming the frame's agentId and
//     sessionEpoch (AUTH_INVALID_SIGNATURE), then Backend.Hello (signature,
//     key, freshness, nonce, session epoch). Any other frame before a
//     successful HELLO gets AUTH_REQUIRED. Spec 17 does not say whether to
//     drop such a connection; we keep it, so a client can retry HELLO, and
//     close it if HELLO has not succeeded within Options.HandshakeTimeout
//     of the TCP accept.
//   - Binary messages, malformed or non-I-JSON text, duplicate members,
//     unknown frame types, frames that fail websocket-frame.schema.json and
//     server-only frames (EVENT, BACKPRESSURE, GROUPS, a server HELLO, a
//     receipt ACK) get PROTOCOL_VIOLATION, with inReplyTo when the frameId was a
//     valid id, and the connection stays up. A message over
//     Options.MaxFrameBytes gets PROTOCOL_VIOLATION and then close 1009,
//     because the rest of it is never read.
//   - Every ERROR passes error.schema.json: unknown codes and plain Go
//     errors become INTERNAL_ERROR without their text, retryable follows
//     the code, a JSON pointer is moved into details.pointer.
//   - A client ERROR is logged and not answered (two peers must not bounce
//     errors); a PING is echoed with its nonce and reply true; a client ACK
//     goes to Backend.Acked.
//
// # Limits
//
// Serve counts every accepted TCP connection, below TLS, until it closes
// (limits.go): at most MaxConns, and at most MaxConnsPerIP per remote
// address of those not yet authenticated (a successful HELLO takes a
// connection off its address's count). A connection over a cap gets HTTP
// 503 with Retry-After and an error body before any upgrade (a small pool;
// beyond it, it is closed at once). Each has HandshakeTimeout from accept
// to a completed HELLO. Failed HELLO attempts are rate-limited per remote
// address (one that succeeds is not charged) and client PINGs per
// connection (x/time/rate token buckets fed the Backend clock), answered
// with RATE_LIMITED. A Server used only through Handler() behind another
// http.Server gets the rate limits but not the connection caps.
//
// # Sessions
//
// A connection belongs to the session its HELLO opened. Backend.SessionReplaced
// (asked at HELLO, so a replacement racing the HELLO is not missed) fires
// when a newer session of the agent exists; the connection then stops
// streaming at once, refuses every new frame with AUTH_STALE_SESSION, lets
// the commands already running answer (the connection that sent
// session_open gets its receipt), and ends with a final ERROR
// AUTH_STALE_SESSION without inReplyTo and close 1008. The peer's own
// commands must carry the HELLO's sessionEpoch; another one is
// AUTH_STALE_SESSION before the Backend sees it.
//
// A Backend that also implements MemberGroups tells the agent its Groups
// (ours, docs/wire.md): the HELLO answer lists them, and a GROUPS frame
// follows every change of that list while the session lasts, so an agent
// learns a Group it joined and can SUBSCRIBE it.
//
// # Streaming
//
// SUBSCRIBE authorizes each Group with Backend.Authorize; unknown and
// forbidden Groups get the same GROUP_NOT_FOUND (same message, details only
// echo the groupId the client sent). Each authorized Group gets a stream:
// replay after afterSequence in batches of Options.ReplayBatch, then live
// events when Backend.Changed fires. One delivery goroutine per connection
// runs every stream of it (stream.go), a batch per turn in the order the
// Groups became ready, so goroutines per connection do not grow with the
// Groups it streams: a caught-up stream is a callback registered with a
// Backend that is a ChangeNotifier (authority-lite's Service is), and only
// a stream paused on a full lane, or waiting on a Backend without
// OnChange, holds a goroutine waiting on a channel. A second SUBSCRIBE of a Group restarts
// its stream from the new position; frames of the replaced stream still
// queued are dropped. CURSOR_TOO_OLD (or any other Events error) is sent as
// an ERROR naming the Group, with the Backend's details (the snapshot
// reference), and that Group is no longer streamed. A stream that ends
// (that way, or having sent a closed Group's last event: Closer) gives
// back its lane and its place under Options.MaxGroups, so a connection
// keeps nothing for a Group that is over though the binding has no
// UNSUBSCRIBE.
//
// Filters follow spec 17.2 literally: an attention filter changes live
// delivery only, so replay (the events stored when the stream first caught
// up) is sent whole and later events are filtered by type and WorkItem
// (both lists must match when both are given). Filtered-out events are
// simply not sent; sequences in EVENT frames, cursors and ACKs still refer
// to the Group's own sequence, so a filtering client sees gaps.
//
// All Groups share the connection. Every Group has a bounded lane of
// Options.SendBuffer EVENT frames and replies have their own lane; one
// writer goroutine takes the lanes in round robin, one frame per turn.
// When a Group's lane is full, its stream stops fetching, sends
// BACKPRESSURE {groupId, retryAfterMs} (at most once per RetryAfter of the
// Backend clock) and waits until the writer has drained the lane to half;
// it then continues from the next sequence, so nothing is lost or repeated
// and other Groups keep flowing. The client needs to do nothing: the pause
// ends by itself, and retryAfterMs is only guidance.
//
// # Commands
//
// COMMAND hands Backend.Submit the JCS bytes of the command member as
// received (signatures are over JCS, so nothing signed changes) and answers
// ACK {inReplyTo, receipt} or ERROR {inReplyTo, actionId}. Commands of one
// Group run in arrival order; different Groups run concurrently. More than
// Options.MaxPendingCommands pending commands are answered with a
// retryable BACKPRESSURE error.
//
// # Liveness
//
// A client silent for PingInterval gets a server PING; one silent for
// IdleTimeout is closed (1008). Time comes from Backend.Now, checked every
// Options.Tick. Server.Close closes every connection with 1001 and waits
// for its goroutines, including Backend.Submit calls in flight, which must
// return when their context ends.
package wss
