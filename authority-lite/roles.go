package authoritylite

import (
	"slices"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// An agent holds in a Group only roles its Agent Card declares: a card
// saying "worker" cannot be made coordinator, an "observer" cannot be
// given work. The Group's membership records the roles it was given;
// these checks keep them within the card, and keep work.offer to members
// that hold the worker role.

// cardAllows refuses a role the agent's registered card does not declare
// (AUTH_FORBIDDEN: the agent lacks the eligibility), and an agent without
// a card (INVALID_COMMAND). Roles of humans are not carried by cards.
func (s *Service) cardAllows(principal protocol.Actor, role protocol.Role, ptr string) error {
	if principal.Kind != protocol.ActorAgent {
		return nil
	}
	a := s.org.agent(principal.ID)
	if a == nil {
		return protocol.InvalidCommand("agent %s has no registered Agent Card", principal.ID).At(ptr)
	}
	if !slices.Contains(a.Card.Roles, role) {
		e := protocol.Forbidden("the Agent Card of %s does not declare the %s role", principal.ID, role).At(ptr)
		return protocol.WithDetails(e, "role", string(role), "cardRoles", rolesOf(a.Card.Roles))
	}
	return nil
}

func rolesOf(rs []protocol.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// checkRoles applies the card rule to a membership.change.
func (s *Service) checkRoles(pl *protocol.ChangeMembershipPayload) error {
	for i, r := range pl.Roles {
		if err := s.cardAllows(pl.Principal, r, "/payload/roles/"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

// checkCoordinatorCard keeps mission.assign_coordinator to agents whose
// card declares the coordinator role.
func (s *Service) checkCoordinatorCard(pl *protocol.AssignCoordinatorPayload) error {
	return s.cardAllows(protocol.Actor{Kind: protocol.ActorAgent, ID: pl.AgentID}, protocol.RoleCoordinator, "/payload/agentId")
}

// checkCandidates keeps a work.offer to active members of the Group that
// hold the worker role, by membership and by card: a candidate that is no
// member is MEMBERSHIP_REQUIRED, one without the role AUTH_FORBIDDEN, at
// its pointer. Nothing of another Group is told: the offer's sender is a
// member of this one.
func (s *Service) checkCandidates(gs *groupState, pl *protocol.OfferWorkPayload) error {
	for i, c := range pl.Candidates {
		ptr := "/payload/candidates/" + strconv.Itoa(i) + "/agentId"
		who := protocol.Actor{Kind: protocol.ActorAgent, ID: c.AgentID}
		m := gs.members[actorKey(who)]
		if m == nil || m.State != protocol.MembershipActive {
			return protocol.WithDetails(protocol.Errorf(protocol.CodeMembershipRequired, "candidate %s is not a member of group %s", c.AgentID, gs.id).At(ptr),
				"agentId", c.AgentID)
		}
		if !slices.Contains(m.Roles, protocol.RoleWorker) {
			e := protocol.Forbidden("candidate %s does not hold the worker role in group %s", c.AgentID, gs.id).At(ptr)
			return protocol.WithDetails(e, "role", string(protocol.RoleWorker), "memberRoles", rolesOf(m.Roles))
		}
		if err := s.cardAllows(who, protocol.RoleWorker, ptr); err != nil {
			return err
		}
	}
	return nil
}
