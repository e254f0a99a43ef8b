// Package toolkeys derives the idempotency keys of external tool operations
// (spec 16) and keeps the ledger that makes a retried operation return its
// first result instead of running twice.
//
// Status: not yet implemented (issue 6).
package toolkeys
