// Package queue is the worker's durable store: per Group an inbox, a durable
// cursor and a work-queue projection, all in one bbolt file and rebuildable
// by replaying the inbox (spec 11.1, 16; docs/design.md §3–4).
//
// # Files
//
// The store is DIR/worker.db (FileName). While a Store is open for writing
// it also listens on DIR/worker.sock (SocketName, mode 0600): bbolt's flock
// gives the writer an exclusive lock that would block any read-only opener,
// so OpenReader (and `mwp-worker inspect`) first tries a read-only open with
// a short timeout and, when a worker holds the file, asks it over the socket
// for a consistent copy (one read transaction, tx.WriteTo) plus the
// in-memory reorder-buffer status. Unix socket paths are limited to about
// 100 bytes, so the data directory path must be shorter than that.
//
// # Layout (schema version 1)
//
//	meta/
//	|--> schema       -> uint64 BE, SchemaVersion; Open refuses any other
//	|--> projection   -> uint64 BE, ProjectionVersion; Open rebuilds on any other
//	groups/
//	|--> <groupId>/
//	     |--> meta/
//	     |    |--> cursor       -> uint64 BE: highest contiguous sequence applied
//	     |    |--> base         -> uint64 BE: the inbox holds sequences > base
//	     |    |--> snapshot     -> JCS bytes of the restored Group Snapshot
//	     |    |--> snapshotRef  -> JSON protocol.SnapshotRef
//	     |    |--> mission      -> JSON MissionView        (projection)
//	     |    |--> members      -> JSON []Member           (projection)
//	     |    |--> diverged     -> JSON Divergence (set once; cleared by a restore)
//	     |--> inbox/   uint64 BE sequence -> event JCS bytes, as received (after base)
//	     |--> pruned/  the projection at base, when the inbox was pruned
//	     |    |--> sequence   -> uint64 BE: the base it stands at
//	     |    |--> projection -> uint64 BE: ProjectionVersion that wrote it
//	     |    |--> mission, members -> as meta's, at base
//	     |    |--> recent     -> JSON [{id, seq}]: pruned eventIds the RecentEventIDs window covers
//	     |    |--> items/     workItemId -> JSON Entry, at base
//	     |--> events/  (files of earlier builds only: a durable eventId index, no longer read)
//	     |--> queue/   workItemId -> JSON Entry            (projection)
//	org/          eventId -> JCS bytes of an Organization-scoped event
//	outbox/       uint64 BE put order -> uvarint(len(hdr)) hdr(JSON) signed bytes
//	outboxIndex/  actionId -> uint64 BE put order
//	offline/      reserved for package offline
//	checkpoints/  reserved for package checkpoint
//	toolkeys/     reserved for package toolkeys
//	notices/      reserved for runtime (messages the worker posts: refusals, schedule updates)
//	observed/     reserved for runtime (observed run durations and start latency, for estimates)
//	forgotten/    groupId -> JSON Tombstone of a forgotten Group
//
// The reserved buckets are created here so the layout lives in one place;
// their owners reach them through Store.DB. Changing this tree means a new
// SchemaVersion. The projection (queue/, mission, members) is derived
// data: a build that projects differently raises ProjectionVersion, and
// Open rebuilds every Group by replay when the file's differs (spec 11.1),
// so an upgraded worker never reads a view an older build wrote.
//
// # Applying events
//
// Apply routes each verified event by groupId before any sequence logic,
// drops duplicates (sequence at or below the cursor, or already held: an
// event is signed with its sequence, so a redelivery always carries the
// same one; see RecentEventIDs for an eventId reused elsewhere), and
// applies each Group's contiguous run after its cursor; inbox append,
// dedupe index, projection and cursor advance for every Group of the batch
// commit in one bbolt Update (group commit: one fsync pair per batch, not
// per event). Events ahead of a gap wait in a per-Group memory buffer
// bounded by count and bytes; when it is full the events farthest from the
// cursor are dropped and reported (Result.Dropped, Result.Gaps) so the
// caller re-subscribes after the durable cursor. The buffer is not durable:
// after a crash the authority replays from the cursor. Only cursors in
// Result.Cursors (or Store.Cursors) may be ACKed.
//
// An event whose eventId was accepted under another sequence (among the
// last RecentEventIDs of its Group), or a second event for a sequence, is
// rejected (PROTOCOL_VIOLATION) and never applied; the Group then waits at
// that sequence. An event at a sequence already applied is compared with
// the stored one: the same signed bytes are a duplicate, anything else a
// Divergence (the authority contradicts the worker's log): the Group
// applies nothing more, durably (meta/diverged), until it is reset
// (ResetGroup, `mwp-worker resync`) or a snapshot of the authority is
// restored over it (RestoreSnapshot then accepts one behind the cursor).
// The other divergence, an authority whose log ends before the cursor, is
// found on the wire and recorded with MarkAhead.
//
// # The overlap below the cursor
//
// The client subscribes each Group after ReplayAfter, not after the
// cursor: the authority sends the newest applied events again and Apply
// compares each with the stored bytes, so an authority restored from an
// older copy that reissued those sequences is caught before anything past
// the cursor applies. For that the inbox must keep, whatever else is
// pruned, at least the last OverlapEvents (4) events up to the cursor:
// ReplayAfter walks down from the cursor over the events it holds, so an
// inbox holding fewer only narrows the comparison (to none right after a
// snapshot restore, whose events are at or below base), it never breaks
// the subscription. An event at or below base is counted a duplicate: there
// is nothing to compare it with. An event the projection cannot interpret (a payload of the
// wrong shape, an unknown WorkItem) is
// still stored and passes the cursor: the authority's log is the truth and
// the view must not stall on it; it is reported in Result.Problems.
//
// Organization-scoped events (agent_card_registered, session_opened) have
// no Group: they are stored once by eventId in org/, never in an inbox, and
// returned in Result.Org for the runtime (session replacement).
//
// An applied event whose causationId is a pending outbox actionId answers
// that Command: it leaves the outbox in the same transaction.
//
// Commit takes a Batch, one turn of the worker's session loop: its events
// (as Apply), the Commands to record before they are sent and the answered
// Commands to remove, in one transaction. The actionIds the outbox holds
// are kept in memory, so removing one already answered, or putting the
// same bytes again, opens no transaction at all.
//
// # The projection
//
// The view keeps every WorkItem of a Group, not only those offered to or
// owned by this worker (Entry.Concerns), because dependency states need the
// others. project is pure (view, event → changed entries); it reads only
// the event, never a clock, so Rebuild reproduces the stored bytes exactly.
//
// Mission and WorkItem state is the Group state machine's: each event's
// payload is decoded into its one Go type (as group.Decode; a contract's
// members other than its scheduling inputs and an offer's selection basis
// are left out, payload.go) and applied with group.Fold, the function the
// authority applies its own events with, to the records the event touches
// (Entry.Item, MissionView.Record). The
// entry's other members are derived from that record plus what only the
// worker keeps: the scheduling inputs of the last contract an event carried
// (ContractSeq names that event; the full contract stays in the inbox), the
// dependencies' states, and EnqueuedAt, the authority's occurredAt of the
// event that put the item into queued. A terminal Mission's unfinished
// items follow by their own work.cancelled or work.failed events.
// Memberships and the archive are followed here (group does not fold them
// yet).
//
// # Snapshots
//
// RestoreSnapshot handles CURSOR_TOO_OLD: it checks the snapshot's JCS
// digest against the reference (digest over the whole document, signature
// included) and its signature through the caller's verify callback, then
// replaces the Group's buckets with the snapshot's projection, cursor and
// base in one transaction. Rebuild starts from the pruned base, else the
// stored snapshot, and replays the inbox after it.
//
// # Pruning the inbox
//
// The inbox keeps what dedupe, divergence detection and rebuild need, not
// the whole history: a Group's projection at its base (pruned/, or the
// restored snapshot) plus the events after it. When a commit leaves more
// than TailEvents+PruneEvery events after the base, that same transaction
// folds the oldest into pruned/ (replaying them over the old base with the
// one projection, and rewriting only the entries they changed), deletes
// them and moves the base: a crash keeps either the old base and events or
// the new ones. Rebuild is then "load pruned/, replay the inbox"; full
// replay and prune-then-rebuild give byte-identical projections (the
// property test in prune_test.go).
//
// What is never pruned:
//   - the newest TailEvents (64; at least MinTailEvents, 16) events: the
//     overlap a divergence check re-reads below the cursor, compared byte
//     for byte with what the authority sends again;
//   - any event at or after the lowest contract or Context Package event
//     (Entry.ContractSeq, Entry.ContextSeq) of a WorkItem that is not
//     terminal, or the Mission-wide Context Package of a Mission that is
//     not, so Contract and ContextPackage answer for live work. A WorkItem
//     that stays open holds the inbox from its contract on.
//
// The RecentEventIDs window survives pruning: the ids of pruned events it
// still covers are kept in pruned/recent and refill it on Open. A
// Context Package's cited range below the base is answered CURSOR_TOO_OLD
// (CitedEvents), as after a restored snapshot; Event and Contract of a
// finished WorkItem pruned past fail. Duplicates at or below the base count
// as duplicates without a byte comparison, as below a restored snapshot.
// Terminal WorkItems stay in the projection (dependencies read their
// state): about 1 KB each.
//
// A pruned base is this build's projection of events that are gone: a
// build that projects differently (ProjectionVersion) cannot re-project
// them, so Open empties such a Group (ResetGroup) and it is read again
// from the authority, from its log or its signed snapshot.
//
// # Forgotten Groups
//
// Forget drops every bucket of a Group the runtime found over for this
// worker (a terminal Mission holding nothing of it, after a grace) and
// keeps a tombstone in forgotten/, in one transaction; while the outbox
// holds a Command of the Group it refuses (ErrGroupHeld). Events of a
// forgotten Group are counted as duplicates and stored nowhere (its stream
// on the current connection may run until the next reconnect: the binding
// has no frame to end one), and the client does not subscribe it again
// when the authority lists it. KeepTombstones drops the tombstones of
// Groups the authority no longer lists, so they are bounded by that list.
// forgotten/ is added to an older file on Open; an older build ignores it
// (and would subscribe the Group again, from cursor 0).
//
// # Damaged files
//
// Every transaction runs under storecheck.Guard, Open walks the page tree
// from the file and checks each Group's inbox tail and cursor, and the first
// bad page met later fails the Store for good (integrity.go). Check is
// `mwp-worker check`. The store is rebuilt from the authority when damaged
// (docs/operations.md).
package queue
