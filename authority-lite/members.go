package authoritylite

import (
	"slices"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Membership, delegation and messages live in the service layer: they
// gate who may send what, but never move Mission or WorkItem state.

// MaxDelegationDepth is the default bound of re-delegation chains
// (spec 20), Policy.MaxDelegationDepth; a maxDelegationDepth grant lifts it
// for one command.
const MaxDelegationDepth = 3

func membershipAggregate(a protocol.Actor) protocol.Aggregate {
	return protocol.Aggregate{Kind: protocol.AggregateMembership, ID: string(a.Kind) + ":" + a.ID}
}

// ensureMember gives principal the role (joining the Group when new) and
// drafts membership.changed; the principal's membership epoch moves so
// commands prepared under the old roles are fenced.
func (s *Service) ensureMember(gs *groupState, principal protocol.Actor, role protocol.Role, by protocol.Actor, p *pending) {
	m := gs.members[actorKey(principal)]
	if m != nil && m.State == protocol.MembershipActive && slices.Contains(m.Roles, role) {
		return
	}
	roles := protocol.List[protocol.Role]{role}
	if m != nil && m.State == protocol.MembershipActive {
		roles = append(slices.Clone(m.Roles), role)
	}
	s.setMembership(gs, principal, roles, by, p)
}

func (s *Service) setMembership(gs *groupState, principal protocol.Actor, roles protocol.List[protocol.Role], by protocol.Actor, p *pending) *protocol.Membership {
	old := gs.members[actorKey(principal)]
	m := &protocol.Membership{GroupID: gs.id, Principal: principal, Roles: roles, State: protocol.MembershipActive, MembershipEpoch: 1, Revision: 1}
	if old != nil {
		m.MembershipEpoch, m.Revision, m.JoinedAt = old.MembershipEpoch+1, old.Revision+1, old.JoinedAt
		if old.State == protocol.MembershipActive {
			m.Delegations = old.Delegations
		}
	}
	if old == nil || old.State != protocol.MembershipActive {
		m.JoinedAt = p.nowTime()
	}
	gs.members[actorKey(principal)] = m
	p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtMembershipChanged, Aggregate: membershipAggregate(principal), Revision: m.Revision, Actor: by, Payload: m})
	return m
}

// nowTime is the decision time recorded in membership records.
func (p *pending) nowTime() protocol.Time { return p.now }

func (s *Service) membership(c *call, gs *groupState, p *pending) error {
	if gs.g.Mission == nil {
		return protocol.InvalidTransition("group %s has no Mission", gs.id)
	}
	switch pl := c.payload.(type) {
	case *protocol.ChangeMembershipPayload:
		if err := s.requireOwnerOrCoordinator(c, gs); err != nil {
			return err
		}
		if len(pl.Roles) == 0 {
			return protocol.InvalidCommand("membership.change needs at least one role; use membership.end to remove a member").At("/payload/roles")
		}
		owner := gs.g.Mission.Owner
		hasOwner := slices.Contains(pl.Roles, protocol.RoleMissionOwner)
		if (pl.Principal == owner) != hasOwner {
			return protocol.Forbidden("the missionOwner role belongs to %s alone and cannot be moved or dropped", owner.ID)
		}
		if pl.Principal.Kind == protocol.ActorAgent && s.org.agent(pl.Principal.ID) == nil {
			return protocol.InvalidCommand("agent %s has no registered Agent Card", pl.Principal.ID).At("/payload/principal")
		}
		if err := s.checkRoles(pl); err != nil {
			return err
		}
		if err := checkMembershipRevision(c, gs, pl.Principal); err != nil {
			return err
		}
		s.setMembership(gs, pl.Principal, slices.Clone(pl.Roles), c.cmd.Actor, p)
	case *protocol.EndMembershipPayload:
		if pl.Principal != c.cmd.Actor {
			if err := s.requireOwnerOrCoordinator(c, gs); err != nil {
				return err
			}
		}
		if pl.Principal == gs.g.Mission.Owner {
			return protocol.Forbidden("the MissionOwner's membership cannot end while the Mission exists")
		}
		old := gs.members[actorKey(pl.Principal)]
		if old == nil || old.State != protocol.MembershipActive {
			return protocol.InvalidTransition("%s is not an active member", pl.Principal.ID)
		}
		if err := checkMembershipRevision(c, gs, pl.Principal); err != nil {
			return err
		}
		m := *old
		m.State, m.MembershipEpoch, m.Revision, m.Delegations = protocol.MembershipEnded, old.MembershipEpoch+1, old.Revision+1, nil
		ended := c.now
		m.EndedAt = ptrTime(protocol.NewTime(ended))
		gs.members[actorKey(pl.Principal)] = &m
		p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtMembershipEnded, Aggregate: membershipAggregate(pl.Principal), Revision: m.Revision, Actor: c.cmd.Actor, Payload: &m})
	case *protocol.GrantDelegationPayload:
		return s.grantDelegation(c, gs, pl, p)
	}
	return nil
}

// checkMembershipRevision is the compare-and-set of spec 15.3 on a
// membership: an expectedRevision other than the principal's current
// membership revision (0 before it first joined) is REVISION_CONFLICT.
// Commands are decided one after another on the state the earlier ones
// left, so of two changes expecting the same revision one applies.
func checkMembershipRevision(c *call, gs *groupState, principal protocol.Actor) error {
	var current uint64
	if m := gs.members[actorKey(principal)]; m != nil {
		current = m.Revision
	}
	return group.CheckRevision(c.cmd.ExpectedRevision, protocol.AggregateMembership, membershipAggregate(principal).ID, current)
}

func ptrTime(t protocol.Time) *protocol.Time { return &t }

// requireOwnerOrCoordinator admits the MissionOwner, or the coordinator on
// its current epoch and lease.
func (s *Service) requireOwnerOrCoordinator(c *call, gs *groupState) error {
	return gs.g.RequireOwnerOrCoordinator(group.InputFromCommand(c.cmd, c.payload), c.now)
}

func (s *Service) grantDelegation(c *call, gs *groupState, pl *protocol.GrantDelegationPayload, p *pending) error {
	if err := gs.g.RequireCoordinator(group.InputFromCommand(c.cmd, c.payload), c.now); err != nil {
		return err
	}
	if !pl.ExpiresAt.After(c.now) {
		return protocol.InvalidCommand("delegation %s expires in the past", pl.DelegationID).At("/payload/expiresAt")
	}
	if pl.Delegate == c.cmd.Actor {
		return protocol.InvalidCommand("a delegation to oneself is cyclic").At("/payload/delegate")
	}
	m := gs.members[actorKey(pl.Delegate)]
	if m == nil || m.State != protocol.MembershipActive {
		return protocol.Errorf(protocol.CodeMembershipRequired, "delegate %s is not a member", pl.Delegate.ID).At("/payload/delegate")
	}
	// The chain's depth is a policy limit (checkPolicy, a grant may lift
	// it); its shape is checked here.
	if _, err := delegationDepth(gs, pl); err != nil {
		return err
	}
	if findDelegation(gs, pl.DelegationID) != nil {
		return protocol.InvalidCommand("delegation %s already exists", pl.DelegationID).At("/payload/delegationId")
	}
	nm := *m
	nm.Delegations = append(slices.Clone(m.Delegations), protocol.Delegation{
		DelegationID: pl.DelegationID, Delegator: c.cmd.Actor, Delegate: pl.Delegate, CommandTypes: slices.Clone(pl.CommandTypes),
		WorkItemIDs: slices.Clone(pl.WorkItemIDs), ExpiresAt: pl.ExpiresAt, ParentDelegationID: pl.ParentDelegationID,
	})
	nm.Revision++
	gs.members[actorKey(pl.Delegate)] = &nm
	p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtMembershipDelegationGranted, Aggregate: membershipAggregate(pl.Delegate), Revision: nm.Revision, Actor: c.cmd.Actor, Payload: &nm})
	return nil
}

// delegationDepth is the length of the chain pl would end (1 without a
// parent), or why the chain is malformed: cyclic, or through an unknown
// delegation.
func delegationDepth(gs *groupState, pl *protocol.GrantDelegationPayload) (int, error) {
	depth, seen := 1, map[string]bool{pl.DelegationID: true}
	for parent := pl.ParentDelegationID; parent != ""; depth++ {
		if seen[parent] {
			return 0, protocol.InvalidCommand("delegation chain through %s is cyclic", parent).At("/payload/parentDelegationId")
		}
		seen[parent] = true
		d := findDelegation(gs, parent)
		if d == nil {
			return 0, protocol.InvalidCommand("parent delegation %s not found", parent).At("/payload/parentDelegationId")
		}
		if d.Delegate == pl.Delegate {
			return 0, protocol.InvalidCommand("delegation back to %s is cyclic", pl.Delegate.ID).At("/payload/delegate")
		}
		parent = d.ParentDelegationID
	}
	return depth, nil
}

func findDelegation(gs *groupState, id string) *protocol.Delegation {
	for _, m := range gs.members {
		for i := range m.Delegations {
			if m.Delegations[i].DelegationID == id {
				return &m.Delegations[i]
			}
		}
	}
	return nil
}

// delegated reports whether the actor holds a live delegation from the
// current coordinator covering this command (spec 10.2 "scope delegate").
func (s *Service) delegated(c *call, gs *groupState) bool {
	m := gs.members[actorKey(c.cmd.Actor)]
	if m == nil || gs.g.Mission == nil || gs.g.Mission.Coordinator == nil {
		return false
	}
	item := workItemOf(c.payload)
	for _, d := range m.Delegations {
		if d.Delegator.ID != gs.g.Mission.Coordinator.AgentID || !d.ExpiresAt.After(c.now) {
			continue
		}
		if !slices.Contains(d.CommandTypes, string(c.cmd.Type)) {
			continue
		}
		if len(d.WorkItemIDs) > 0 && !slices.Contains(d.WorkItemIDs, item) {
			continue
		}
		return true
	}
	return false
}

// workItemOf returns the WorkItem a payload names, if any.
func workItemOf(p any) string {
	switch p := p.(type) {
	case *protocol.AuthorizeWorkPayload:
		return p.WorkItemID
	case *protocol.OfferWorkPayload:
		return p.WorkItemID
	case *protocol.UnblockWorkPayload:
		return p.WorkItemID
	case *protocol.AcceptResultPayload:
		return p.WorkItemID
	case *protocol.FailWorkPayload:
		return p.WorkItemID
	case *protocol.CancelWorkPayload:
		return p.WorkItemID
	case *protocol.InsertDependencyPayload:
		return p.WorkItemID
	}
	return ""
}
