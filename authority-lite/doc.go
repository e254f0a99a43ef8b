// Package authoritylite is a minimal Group Authority: one Organization service
// and one logical Group service that own the signed, append-only per-Group
// event log workers project. It can run embedded in a worker process or serve
// the WebSocket binding (spec 17) on its own.
//
// The decisions themselves are package group's: the Mission and WorkItem
// state machines, and beside them memberships and delegations, messages,
// cooperation-override grants, artifact publication and budgets, all pure
// and clock-injected. The service reads the Organization for them
// (directory, members.go) and folds what they decide (pending.record).
//
// Around the core, Service is the edge: the command pipeline of spec 15.1
// (strict decode, signature, key, freshness, epoch presence, schema,
// extensions, idempotency by (actor, actionId), session and membership
// epochs, then group), the Organization service (Agent Cards, sessions
// whose replacement revokes leases, human and policy principals), the bbolt
// log (events, the records beside them and the receipt in one transaction,
// one writer goroutine for group commit; the decision state checkpointed
// and folded forward at open, see log.go), the artifact store, the rates
// and counted limits of spec 20, the ancestors' budget sums, and the
// wss.Backend the WebSocket server calls.
//
// Offline reconciliation (spec 11.5) reuses package offline's pure
// CheckBuffered, so the worker and the authority judge a binding by the
// same rules; that is the one import beyond protocol and internal.
//
// The log records the key it was created for and refuses another key, or
// a missing log beside the key (identity.go); a damaged log gives coded
// errors, never a panic, and a Group whose events fail verification is not
// served (integrity.go); a restart verifies only what was appended since the
// last verification pass, whose per-Group marks are bound to the log by a
// digest (verified.go); Check is `mwp-worker authority check`.
//
// Retention (Config.RetainEvents) snapshots a Group and deletes its older
// events (snapshot.go); archiving (Config.ArchiveAfter) archives finished
// Groups through group_archive and releases their state to a stub that
// Open does not read before serving (archive.go); receipts go once no
// retry can come, and Config.PurgeAfter deletes archived Groups
// (purge.go). CompactLog gives a stopped log's free pages back.
package authoritylite
