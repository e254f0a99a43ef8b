// Package bench is the load generator behind `mwp-worker bench`: it runs
// authority-lite in process (authority-lite/embed) and real workers
// (runtime.Worker, each with its own store, reaching the authority over
// wss as in production) with a no-op handler, drives WorkItems end to end
// (authorize, offer, accept, start, submit, accept_result) from a fixed
// number of lanes, and measures what each item cost: latency per phase,
// fdatasyncs and bytes written, CPU, and the Ed25519 floor of the same
// commands and events measured in the same run.
//
// The coordinator and the human owner are in-process principals of the
// authority (their commands skip the wire, as a coordinator co-located
// with the authority would); the workers never do. With Config.Remote the
// run targets a running authority instead, as principals it knows: the
// owner and the coordinator over its HTTPS routes (package remote), the
// workers over wss; only this process's stores, bytes and CPU are
// measured then (embedded.go, remote.go: the two sides of one interface).
//
// Phase times are when the driver sees each event committed in the
// authority's log, so they include the authority's fsync but not the
// worker's receipt of the last event. A run where an item does not reach
// verified, or the log records a failure of one, is an error: there is
// no partial result.
//
// Soak (soak.go) runs the same items open loop instead, at a fixed rate
// over Missions in turn, each in a Group of its own that is approved once
// its items are verified, and reads every interval what the processes
// and stores hold (usage.go): heap after a forced collection, goroutines
// by whose code runs them, open files, bbolt pages in use and directory
// sizes, a running authority's from its /metrics. growth.go turns the
// readings into slopes per hour and per item.
package bench
