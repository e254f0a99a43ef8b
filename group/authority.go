package group

import (
	"sort"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Who may act (docs/design.md §11, spec 15.1): the MissionOwner is a human; the
// coordinator is an agent holding the current coordinator epoch and an
// unexpired coordinator lease; an Organization service acts by policy.
// Membership and roles were already checked by the pipeline; these checks
// need Mission state.

func (t *txn) isOwner() bool {
	a := t.in.Actor
	return t.mission != nil && a.Kind == protocol.ActorHuman && a.ID == t.mission.Owner.ID
}

func (t *txn) requireOwner() error {
	if !t.isOwner() {
		return protocol.Forbidden("%s: only the MissionOwner may do this", t.in.Type)
	}
	return nil
}

// requireCoordinator checks an agent command authorized by the coordinator
// lease. A stale epoch is reported before identity so a replaced coordinator
// learns it was fenced.
func (t *txn) requireCoordinator() error {
	if t.in.Actor.Kind != protocol.ActorAgent {
		return protocol.Forbidden("%s: needs the coordinator lease, held by an agent", t.in.Type)
	}
	if t.in.CoordinatorEpoch == nil {
		return protocol.InvalidCommand("%s: coordinatorEpoch is required when acting on the coordinator lease", t.in.Type).At("/coordinatorEpoch")
	}
	c := t.mission.Coordinator
	if c == nil {
		return protocol.Forbidden("%s: the Mission has no coordinator", t.in.Type)
	}
	if *t.in.CoordinatorEpoch != c.CoordinatorEpoch {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeAuthStaleCoordinator,
			"coordinator epoch %d is fenced; current is %d", *t.in.CoordinatorEpoch, c.CoordinatorEpoch),
			"coordinatorEpoch", c.CoordinatorEpoch)
	}
	if t.in.Actor.ID != c.AgentID && !t.in.Delegated {
		return protocol.Forbidden("%s: %s is not the coordinator", t.in.Type, t.in.Actor.ID)
	}
	if !before(t.now, c.LeaseExpiresAt) {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeAuthStaleCoordinator,
			"coordinator lease of epoch %d expired at %s", c.CoordinatorEpoch, c.LeaseExpiresAt),
			"coordinatorEpoch", c.CoordinatorEpoch, "reason", "lease_expired")
	}
	return nil
}

// requireCoordinatorOrOwner admits the MissionOwner (human) or the
// coordinator.
func (t *txn) requireCoordinatorOrOwner() error {
	if t.in.Actor.Kind == protocol.ActorHuman {
		return t.requireOwner()
	}
	return t.requireCoordinator()
}

// requireCoordinatorOrService admits the coordinator or an Organization
// service acting by policy.
func (t *txn) requireCoordinatorOrService() error {
	if t.in.Actor.Kind == protocol.ActorService {
		return nil
	}
	return t.requireCoordinator()
}

// maxDurationMs bounds client-supplied durations so they cannot overflow
// time arithmetic; a year is far beyond any lease or offer window.
const maxDurationMs = 366 * 24 * 60 * 60 * 1000

func durationMs(ms uint64, pointer string) (time.Duration, error) {
	if ms == 0 || ms > maxDurationMs {
		return 0, protocol.InvalidCommand("duration %d ms is outside 1 … %d", ms, uint64(maxDurationMs)).At(pointer)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func sortStrings(s []string) { sort.Strings(s) }

// requireSender checks who sent the command against the rules table's
// Sender column (protocol.Commands).
func (t *txn) requireSender() error {
	switch protocol.Commands[t.in.Type].Sender {
	case protocol.SenderOwner:
		return t.requireOwner()
	case protocol.SenderCoordinator:
		return t.requireCoordinator()
	case protocol.SenderCoordinatorOrOwner:
		return t.requireCoordinatorOrOwner()
	case protocol.SenderCoordinatorOrPolicy:
		return t.requireCoordinatorOrService()
	case protocol.SenderWorker:
		return t.requireAgent()
	}
	return protocol.Errorf(protocol.CodeInternalError, "%s: no sender rule the Group state machine checks", t.in.Type)
}
