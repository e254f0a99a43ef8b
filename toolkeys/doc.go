// Package toolkeys derives the idempotency keys of external tool operations
// (spec 16, 11.4) and keeps the ledger that makes a retried operation return
// its first result instead of running twice.
//
// Key(op) is "tk1_" + base64url(sha256(JCS([missionId, workItemId,
// ownershipEpoch, operationId]))), the same in every process and language
// (`mwp-worker toolkey` prints it); AttemptKey names one attempt.
//
// The Ledger lives in the worker's bbolt file (the "toolkeys" bucket of
// queue.Store.DB()). Do commits "attempt n started" with fsync before it
// calls the operation and commits the outcome after, always passing the
// same key. So a worker killed after the external effect but before the
// completion record retries under the same key, and a service that honours
// idempotency keys performs the effect once; a completed operation is never
// called again and its recorded result never changes. Network delivery
// alone cannot give exactly-once effects (spec 16): against a service that
// ignores keys, an attempt cut short by a crash may run twice.
//
// Fence(mission, workItem, epoch) ends older ownerships: Do refuses their
// operations with WORK_STALE_OWNERSHIP, and starting an attempt at a higher
// epoch raises the fence itself. Concurrent Do calls of one key in one
// process are serialized: the second waits (bounded by its context), then
// replays, retries or refuses.
package toolkeys
