// Package group is the Group state machine of MissionWeaveProtocol 0.1: the
// Mission (docs/design.md §11) and WorkItem (spec 10.2) state machines that
// the authority decides with and that every worker's projection follows.
//
// It is pure, in the style of etcd raft: Group.Apply takes an authenticated
// Input and the authority's current time and returns the events to append
// plus effects for the caller (audit records of late results, linked child
// Missions, notices to a parent Group). Nothing here reads a clock, the
// disk or the network; offer, ownership, lease and coordinator expiry are
// decided from the time passed in, never by timers. On error the Group is
// unchanged and the error is a *protocol.Error.
//
// authority-lite wraps it with the command pipeline, the durable log and
// the Organization service; package queue builds a worker's view from the
// same events.
package group
