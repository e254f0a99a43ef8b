// Package authoritylite is a minimal Group Authority: one Organization service
// and one logical Group service that own the signed, append-only per-Group
// event log workers project. It can run embedded in a worker process or serve
// the WebSocket binding (spec 17) on its own.
//
// The decision core is pure, in the style of etcd raft: a Group holds the
// Mission (DESIGN.md §11) and WorkItem (spec 10.2) state machines, and
// Group.Apply takes an authenticated Input and the authority's current time
// and returns the events to append plus effects for the caller (audit
// records of late results, linked child Missions, notices to a parent
// Group). Nothing in the core reads a clock, the disk or the network; offer,
// ownership, lease and coordinator expiry are decided from the time passed
// in, never by timers or events. On error the Group is unchanged and the
// error is a *protocol.Error.
//
// Status: the pure core is implemented; the command pipeline, bbolt log,
// Organization service and WebSocket server are not yet (issue 3).
package authoritylite
