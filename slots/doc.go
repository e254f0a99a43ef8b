// Package slots runs handlers in isolated execution slots: each slot sees only
// its own Mission context, lease-scoped credentials, checkpoint namespace,
// tool budget and side-effect keys (spec 11.1, 11.3).
//
// Status: not yet implemented (issue 5).
package slots
