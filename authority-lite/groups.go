package authoritylite

import (
	"errors"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// createMission handles mission.create and mission.create_follow_up: the
// only commands that create a Group. The human becomes its MissionOwner
// (membership epoch 1) in the same transaction.
func (s *Service) createMission(c *call) (*protocol.Receipt, error) {
	cmd := c.cmd
	if cmd.Actor.Kind != protocol.ActorHuman {
		return nil, protocol.Forbidden("%s: a Mission is created by a human, never by a %s", cmd.Type, cmd.Actor.Kind)
	}
	if cmd.GroupID == "" {
		return nil, protocol.InvalidCommand("%s carries the id of the Group it creates", cmd.Type).At("/groupId")
	}
	s.orgMu.Lock()
	defer s.orgMu.Unlock()
	if err := s.checkActionID(c); err != nil {
		var r errReplay
		if errors.As(err, &r) {
			return &r.receipt, nil
		}
		return nil, err
	}
	if existing := s.group(cmd.GroupID); existing != nil || s.Purged(cmd.GroupID) {
		// Spec 15.1: mission.create carries the id of the Group it creates;
		// a Group holds its one Mission for good.
		return nil, protocol.WithDetails(protocol.InvalidTransition("group %s already exists and holds its Mission: a Group holds exactly one Mission, created with it (spec 15.1); create the Mission in a new Group", cmd.GroupID).At("/groupId"),
			"reason", "group_exists")
	}
	// After the receipt check: a retry of an accepted create costs nothing.
	if err := s.creates.allow(cmd.Actor, c.now); err != nil {
		return nil, protocol.WithDetails(err.(*protocol.Error), "policy", PolicyMissionCreateRate)
	}
	in := group.InputFromCommand(cmd, c.payload)
	if fu, ok := c.payload.(*protocol.CreateFollowUpPayload); ok {
		pred := s.missionByID(fu.FollowUpOf)
		if pred == nil {
			return nil, protocol.InvalidCommand("mission %s not found", fu.FollowUpOf).At("/payload/followUpOf")
		}
		in.Predecessor = pred
	}
	gs := newGroupState(cmd.GroupID, s.cfg.Limits)
	if err := s.profiles.checkGroupExtensions(c, gs); err != nil {
		return nil, err
	}
	out, err := gs.g.Apply(in, c.now)
	if err != nil {
		return nil, err
	}
	p := pending{now: protocol.NewTime(c.now), drafts: out.Events}
	ensureMember(gs, cmd.Actor, protocol.RoleMissionOwner, cmd.Actor, &p)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r, err := s.commitNow(c, gs, &p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.groups[gs.id] = gs
	s.mu.Unlock()
	return r, nil
}

func newGroupState(id string, lim group.Limits) *groupState {
	return &groupState{id: id, g: group.NewGroup(id, lim), members: map[string]*protocol.Membership{}, usage: map[string]protocol.Usage{}, grants: map[string]*grantRecord{}, leases: map[string]*leaseRecord{}, openLeases: map[string][]*leaseRecord{}, counts: newItemCounts(), artifacts: map[string]uint64{}, first: 1, saved: newSavedState(), changed: make(chan struct{})}
}

// missionByID finds a Mission by id across Groups.
func (s *Service) missionByID(id string) *protocol.Mission {
	for _, gid := range s.GroupIDs() {
		gs := s.peekGroup(gid) // a released Group keeps its Mission
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		m := gs.g.Mission
		gs.mu.Unlock()
		if m != nil && m.MissionID == id {
			c := *m
			return &c
		}
	}
	return nil
}

// commitAutomatic appends events caused by an earlier command (spec 15.2)
// without a receipt of their own.
func (s *Service) commitAutomatic(c *call, gs *groupState, p *pending) (*protocol.Receipt, error) {
	c.automatic = true
	return s.commitNow(c, gs, p)
}
