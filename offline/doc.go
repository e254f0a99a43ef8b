// Package offline implements bounded offline execution (spec 11.5): the grace
// window, the bounded durable buffer of signed commands and their rebase and
// re-signing on reconnect.
//
// Status: not yet implemented (issue 6).
package offline
