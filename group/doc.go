// Package group is the Group state machine of MissionWeaveProtocol 0.1: the
// Mission (docs/design.md §11) and WorkItem (spec 10.2) state machines that
// the authority decides with and that every worker's view follows.
//
// It is pure, in the style of etcd raft. Decide takes an authenticated
// Input and the authority's current time and returns the events to append
// plus effects for the caller (audit records of late results, linked child
// Missions, notices to a parent Group), leaving the Group as it was; on
// error the error is a *protocol.Error. Fold applies one accepted event and
// is the only way Mission, WorkItem and proposal state changes: Apply is
// Decide then Fold of its events, the authority folds its own events, and
// a worker folds the events it receives (package queue). Nothing here reads
// a clock, the disk or the network; offer, ownership, lease and coordinator
// expiry are decided from the time passed in, never by timers.
//
// Every event payload has one Go type here, and Events names it and its
// aggregate kind per event type; the event schemas and docs/events.md are
// generated from them. Who may send each command and from which states is
// protocol.Commands, read here by the guards.
//
// Beside the state machines, the authority's other rules are here as a
// decision returning the event and a fold applying it: memberships and
// delegations (members.go), messages (messages.go), cooperation-override
// grants (grants.go), artifact publication (artifacts.go) and budgets
// (budget.go). What they read of the Organization comes in through
// Directory. Not decided here: snapshots and the archive, the counted
// policy limits and rates (authority-lite's service).
package group
