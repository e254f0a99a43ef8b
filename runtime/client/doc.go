// Package client is a worker's connection to its Group Authority over the
// WebSocket binding (spec 17): one socket for every Group, reconnected with
// backoff. It knows the wire and the worker's store (Store, which
// *queue.Store implements), not what the worker decides: the runtime
// drives it, and so can any agent that needs a connection (the
// multi-process test's coordinator). It never imports runtime.
//
// On every connection: HELLO with a proof signed by the agent's key (a fresh
// 256-bit nonce, so a recorded HELLO cannot be replayed); one SUBSCRIBE per
// Group from a few events below the store's durable cursor, so that a
// GROUP_NOT_FOUND or CURSOR_TOO_OLD names its Group by inReplyTo, followed by
// an ACK of the cursor: the events sent again are compared with the stored
// ones, and an authority whose log is not the one the worker followed
// (restored from an older copy) is found before anything new applies
// (diverge.go; a diverged Group is not subscribed again); then every Command still in
// the durable outbox, in put order and with its original bytes, before any
// new one. No attention filter is sent: a filter thins live delivery (spec
// 17.2), and a durable cursor may only pass contiguous sequences (spec 16),
// so a filtering worker would stall at its first filtered-out event.
// Besides the Groups it is given (Config.Groups, AddGroup) and those its
// store knows, it subscribes every Group the authority says the agent is
// a member of: the HELLO answer's groups and each GROUPS frame (ours,
// docs/wire.md), so it follows a Group it joins without a restart.
//
// Inbound frames are decoded and their signatures checked by a pool of
// goroutines (decode.go), because verification is most of an event's cost;
// they reach the session loop in arrival order all the same. The loop
// works in turns (turn.go): it takes everything already waiting (events
// read, Commands handed to Send, receipts and errors answering Commands)
// and commits it in one store transaction (group commit: queue.Store.Commit),
// and only then ACKs the cursors that transaction made durable, writes the
// Commands it recorded and wakes the senders whose Commands it took out of
// the outbox. An ACK is never ahead of the disk, a Command never leaves
// before it is in the outbox, and no step commits on its own. A turn holding
// less than half of what the last commit served waits up to half a commit
// for more (gather.go), so the Commands handed for events just applied and
// the authority's next events share a transaction; a turn answering a
// Command waits the same way for the events its receipt names. A Group stuck on a gap for GapTimeout is
// re-subscribed from its cursor (the store drops the duplicates); a
// CURSOR_TOO_OLD with a snapshot reference is restored through
// FetchSnapshot.
//
// Send hands the Command to the loop, whose turn records it in the outbox
// before the socket, so a crash or a disconnect loses nothing: it is
// resent until answered, also after a restart, unless its issuedAt is older than Config.Freshness: then it is
// never sent stale (spec 19), it leaves the outbox and Send returns
// ErrStale for the sender to build it again. RATE_LIMITED and BACKPRESSURE pause only the Group concerned;
// SendAdvisory returns them instead, so a refused message never holds back
// work Commands. Hand is Send without the wait (hand.go): it never blocks,
// and Commands handed while a Hold is active are taken together when it
// ends, so the Commands one decision sends share one transaction.
//
// A PING every PingInterval detects a dead connection the kernel has not
// noticed. Reconnects wait a jittered, capped exponential delay (Backoff),
// reset only after a connection that lasted ten seconds, so an authority
// that drops every worker right after HELLO is not hammered.
//
// Time-dependent decisions are pure functions of the time they are given
// (sync.go: Command ordering and pauses, the ping tracker, gap timing) and
// timers come from Config.Clock, so tests step a clock.Fake instead of
// sleeping. OnState and OnApplied are called on the client's goroutine.
package client
