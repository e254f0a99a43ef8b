package authoritylite

import (
	"context"
	"sort"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Principal signs and submits commands for one actor in the same process,
// filling the epochs spec 15.1 asks of that actor from the authority's
// current state. In-process coordinators, the approval page and tests use
// it; remote workers send signed bytes over wss instead.
type Principal struct {
	s     *Service
	Actor protocol.Actor
	Key   protocol.PrivateKey
}

// Principal returns a Principal acting as a with key k.
func (s *Service) Principal(a protocol.Actor, k protocol.PrivateKey) *Principal {
	return &Principal{s: s, Actor: a, Key: k}
}

// Envelope returns the epochs this actor must carry for typ in groupID.
func (p *Principal) Envelope(typ protocol.CommandType, groupID string) protocol.Envelope {
	env := protocol.Envelope{GroupID: groupID}
	switch typ {
	case protocol.CmdAgentCardRegister, protocol.CmdSessionOpen:
		env.GroupID = ""
		return env
	case protocol.CmdMissionCreate, protocol.CmdMissionCreateFollowUp:
		return env
	}
	if p.Actor.Kind == protocol.ActorService {
		return env
	}
	if p.Actor.Kind == protocol.ActorAgent {
		env.SessionEpoch = protocol.Uint64(p.s.SessionEpoch(p.Actor.ID))
	}
	if m, ok := p.s.Membership(groupID, p.Actor); ok {
		env.MembershipEpoch = protocol.Uint64(m.MembershipEpoch)
	} else {
		env.MembershipEpoch = protocol.Uint64(0)
	}
	if m, ok := p.s.Mission(groupID); ok && m.Coordinator != nil && m.Coordinator.AgentID == p.Actor.ID && protocol.CarriesCoordinatorEpoch(typ) {
		env.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch)
	}
	return env
}

// Do builds, signs and submits one command; edit adjusts the envelope
// (expected revision, a fixed action id) before signing.
func (p *Principal) Do(ctx context.Context, typ protocol.CommandType, groupID string, payload any, edit ...func(*protocol.Envelope)) (*protocol.Receipt, error) {
	_, raw, err := p.Build(typ, groupID, payload, edit...)
	if err != nil {
		return nil, err
	}
	return p.s.Submit(ctx, "", raw)
}

// Build returns the signed command Do would send.
func (p *Principal) Build(typ protocol.CommandType, groupID string, payload any, edit ...func(*protocol.Envelope)) (*protocol.Command, []byte, error) {
	env := p.Envelope(typ, groupID)
	for _, e := range edit {
		e(&env)
	}
	return protocol.BuildCommand(p.Actor, p.Key, typ, env, payload, p.s.Now())
}

// Join registers an agent's card and opens its next session.
func (p *Principal) Join(ctx context.Context, card protocol.AgentCard) error {
	card.AgentID = p.Actor.ID
	if len(card.Keys) == 0 {
		card.Keys = protocol.List[protocol.PublicKey]{p.Key.Public().Encode()}
	}
	if card.IssuedAt.IsZero() {
		card.IssuedAt = protocol.NewTime(p.s.Now())
	}
	signed, err := protocol.SignedCard(card, p.Key)
	if err != nil {
		return err
	}
	if _, err := p.Do(ctx, protocol.CmdAgentCardRegister, "", &protocol.RegisterAgentCardPayload{AgentCard: signed}); err != nil {
		return err
	}
	return p.OpenSession(ctx)
}

// OpenSession opens the agent's next session.
func (p *Principal) OpenSession(ctx context.Context) error {
	a := p.s.org.agent(p.Actor.ID)
	if a == nil {
		return protocol.Errorf(protocol.CodeAuthForbidden, "agent %s is not registered", p.Actor.ID)
	}
	_, err := p.Do(ctx, protocol.CmdSessionOpen, "", &protocol.OpenSessionPayload{AgentID: p.Actor.ID, SessionEpoch: a.SessionEpoch + 1, AgentCardHash: a.CardHash})
	return err
}

// Mission returns a Group's Mission.
func (s *Service) Mission(groupID string) (protocol.Mission, bool) {
	gs := s.peekGroup(groupID) // an archived Group's stub keeps its Mission
	if gs == nil {
		return protocol.Mission{}, false
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.g.Mission == nil {
		return protocol.Mission{}, false
	}
	return *gs.g.Mission, true
}

// WorkItem returns a copy of a WorkItem's authority record.
func (s *Service) WorkItem(groupID, id string) (group.WorkItem, bool) {
	gs := s.group(groupID)
	if gs == nil {
		return group.WorkItem{}, false
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	w := gs.g.Items[id]
	if w == nil {
		return group.WorkItem{}, false
	}
	return *w.Clone(), true
}

// WorkItemIDs lists a Group's WorkItems.
func (s *Service) WorkItemIDs(groupID string) []string {
	gs := s.group(groupID)
	if gs == nil {
		return nil
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ids := make([]string, 0, len(gs.g.Items))
	for id := range gs.g.Items {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Membership returns a principal's membership in a Group.
func (s *Service) Membership(groupID string, a protocol.Actor) (protocol.Membership, bool) {
	gs := s.peekGroup(groupID) // an archived Group's stub keeps its members
	if gs == nil {
		return protocol.Membership{}, false
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := gs.members[group.MemberKey(a)]
	if m == nil {
		return protocol.Membership{}, false
	}
	return *m, true
}
