package group

import (
	"slices"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Memberships (spec 8.2, 10.1): who belongs to the Group, with which
// roles, under which membership epoch, and the delegations a coordinator
// granted (spec 10.2 "scope delegate"). They gate who may send what; they
// never move Mission or WorkItem state.

// MaxDelegationDepth is the default bound of re-delegation chains
// (spec 20); a maxDelegationDepth grant lifts it for one command.
const MaxDelegationDepth = 3

// Members are a Group's memberships by MemberKey. Every membership event
// carries the principal's whole record, so Fold replaces it.
type Members map[string]*protocol.Membership

// MemberKey is the key of a principal's membership in Members ("kind/id",
// as the authority's store holds them).
func MemberKey(a protocol.Actor) string { return string(a.Kind) + "/" + a.ID }

// MembershipAggregate is the aggregate a principal's membership events name.
func MembershipAggregate(a protocol.Actor) protocol.Aggregate {
	return protocol.Aggregate{Kind: protocol.AggregateMembership, ID: string(a.Kind) + ":" + a.ID}
}

// Card is what the Organization's registry says of an agent that a Group's
// decisions read (spec 8.1): the roles its Agent Card declares, the card's
// hash and the agent version.
type Card struct {
	Roles        []protocol.Role
	Hash         string
	AgentVersion string
}

// Directory is the Organization as the Group's decisions see it: the
// registered Agent Cards and the policy services. It answers from memory;
// the authority passes its Organization, tests a table.
type Directory interface {
	Card(agentID string) (Card, bool)
	PolicyService(id string) bool
}

// Active returns a's membership when it is active, else nil.
func (ms Members) Active(a protocol.Actor) *protocol.Membership {
	m := ms[MemberKey(a)]
	if m == nil || m.State != protocol.MembershipActive {
		return nil
	}
	return m
}

// CheckEpoch is the membership rule of spec 15.1: the sender is an active
// member and the command carries its current membership epoch. A
// non-member gets the GROUP_NOT_FOUND that hides the Group (spec 17.2).
func (ms Members) CheckEpoch(groupID string, a protocol.Actor, epoch *uint64) error {
	m := ms.Active(a)
	if m == nil {
		return GroupNotFound(groupID)
	}
	if epoch == nil || *epoch != m.MembershipEpoch {
		e := protocol.Errorf(protocol.CodeMembershipStale, "membership epoch of %s in %s is %d; the command carries %s", a.ID, groupID, m.MembershipEpoch, epochString(epoch)).At("/membershipEpoch")
		return protocol.WithDetails(e, "membershipEpoch", m.MembershipEpoch)
	}
	return nil
}

// GroupNotFound is the one answer to a command for a Group that does not
// exist and to one for a Group the actor may not know of: spec 17.2 forbids
// telling the two apart (GROUP_NOT_FOUND: "absent or intentionally not
// disclosed", spec 19).
func GroupNotFound(id string) *protocol.Error {
	return protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", id).At("/groupId")
}

func epochString(e *uint64) string {
	if e == nil {
		return "none"
	}
	return strconv.FormatUint(*e, 10)
}

// MembershipAfter is the membership an event leaves: the record it
// carries, except that membership.ended ends it whatever state the record
// says. The authority's Members and every worker's view fold with it.
func MembershipAfter(typ protocol.EventType, m protocol.Membership) protocol.Membership {
	if typ == protocol.EvtMembershipEnded && m.State == protocol.MembershipActive {
		m.State = protocol.MembershipEnded
	}
	return m
}

// Fold applies one membership event.
func (ms Members) Fold(d EventDraft) {
	m, ok := d.Payload.(*protocol.Membership)
	if !ok {
		return
	}
	if m.State == protocol.MembershipActive && d.Type == protocol.EvtMembershipEnded {
		after := MembershipAfter(d.Type, *m)
		m = &after
	}
	ms[MemberKey(m.Principal)] = m
}

// FoldAll applies events in order, skipping those of other aggregates.
func (ms Members) FoldAll(ds []EventDraft) {
	for _, d := range ds {
		if d.Aggregate.Kind == protocol.AggregateMembership {
			ms.Fold(d)
		}
	}
}

// DecideMembership decides membership.change, membership.end and
// membership.grant_delegation (spec 10.1, 10.2) and returns the one event
// to append; ms is left as it was.
func (ms Members) DecideMembership(g *Group, in Input, dir Directory, now time.Time) (EventDraft, error) {
	if g.Mission == nil {
		return EventDraft{}, protocol.InvalidTransition("group %s has no Mission", g.GroupID)
	}
	switch pl := in.Payload.(type) {
	case *protocol.ChangeMembershipPayload:
		return ms.change(g, in, pl, dir, now)
	case *protocol.EndMembershipPayload:
		return ms.end(g, in, pl, now)
	case *protocol.GrantDelegationPayload:
		return ms.delegate(g, in, pl, now)
	}
	return EventDraft{}, protocol.Errorf(protocol.CodeInvalidCommand, "%s: payload is %T", in.Type, in.Payload)
}

// change replaces a principal's roles. The missionOwner role stays with
// the MissionOwner alone, and an agent holds only roles its card declares.
func (ms Members) change(g *Group, in Input, pl *protocol.ChangeMembershipPayload, dir Directory, now time.Time) (EventDraft, error) {
	if err := g.RequireOwnerOrCoordinator(in, now); err != nil {
		return EventDraft{}, err
	}
	if len(pl.Roles) == 0 {
		return EventDraft{}, protocol.InvalidCommand("membership.change needs at least one role; use membership.end to remove a member").At("/payload/roles")
	}
	owner := g.Mission.Owner
	if (pl.Principal == owner) != slices.Contains(pl.Roles, protocol.RoleMissionOwner) {
		return EventDraft{}, protocol.Forbidden("the missionOwner role belongs to %s alone and cannot be moved or dropped", owner.ID)
	}
	if pl.Principal.Kind == protocol.ActorAgent {
		if _, ok := dir.Card(pl.Principal.ID); !ok {
			return EventDraft{}, protocol.InvalidCommand("agent %s has no registered Agent Card", pl.Principal.ID).At("/payload/principal")
		}
	}
	for i, r := range pl.Roles {
		if err := CardAllows(dir, pl.Principal, r, "/payload/roles/"+strconv.Itoa(i)); err != nil {
			return EventDraft{}, err
		}
	}
	if err := ms.checkRevision(in, pl.Principal); err != nil {
		return EventDraft{}, err
	}
	return ms.set(g.GroupID, pl.Principal, slices.Clone(pl.Roles), in.Actor, now), nil
}

// end ends a membership: a member may leave, the MissionOwner or the
// coordinator may remove one, and the MissionOwner stays while the Mission
// exists.
func (ms Members) end(g *Group, in Input, pl *protocol.EndMembershipPayload, now time.Time) (EventDraft, error) {
	if pl.Principal != in.Actor {
		if err := g.RequireOwnerOrCoordinator(in, now); err != nil {
			return EventDraft{}, err
		}
	}
	if pl.Principal == g.Mission.Owner {
		return EventDraft{}, protocol.Forbidden("the MissionOwner's membership cannot end while the Mission exists")
	}
	old := ms.Active(pl.Principal)
	if old == nil {
		return EventDraft{}, protocol.InvalidTransition("%s is not an active member", pl.Principal.ID)
	}
	if err := ms.checkRevision(in, pl.Principal); err != nil {
		return EventDraft{}, err
	}
	m := *old
	m.State, m.MembershipEpoch, m.Revision, m.Delegations = protocol.MembershipEnded, old.MembershipEpoch+1, old.Revision+1, nil
	ended := protocol.NewTime(now)
	m.EndedAt = &ended
	return EventDraft{Type: protocol.EvtMembershipEnded, Aggregate: MembershipAggregate(pl.Principal), Revision: m.Revision, Actor: in.Actor, Payload: &m}, nil
}

// delegate records a coordinator's delegation on the delegate's
// membership. The chain's depth is a policy limit (a grant may lift it);
// its shape is checked here (DelegationDepth).
func (ms Members) delegate(g *Group, in Input, pl *protocol.GrantDelegationPayload, now time.Time) (EventDraft, error) {
	if err := g.RequireCoordinator(in, now); err != nil {
		return EventDraft{}, err
	}
	if !pl.ExpiresAt.After(now) {
		return EventDraft{}, protocol.InvalidCommand("delegation %s expires in the past", pl.DelegationID).At("/payload/expiresAt")
	}
	if pl.Delegate == in.Actor {
		return EventDraft{}, protocol.InvalidCommand("a delegation to oneself is cyclic").At("/payload/delegate")
	}
	m := ms.Active(pl.Delegate)
	if m == nil {
		return EventDraft{}, protocol.Errorf(protocol.CodeMembershipRequired, "delegate %s is not a member", pl.Delegate.ID).At("/payload/delegate")
	}
	if _, err := ms.DelegationDepth(pl); err != nil {
		return EventDraft{}, err
	}
	if ms.delegation(pl.DelegationID) != nil {
		return EventDraft{}, protocol.InvalidCommand("delegation %s already exists", pl.DelegationID).At("/payload/delegationId")
	}
	nm := *m
	nm.Delegations = append(slices.Clone(m.Delegations), protocol.Delegation{
		DelegationID: pl.DelegationID, Delegator: in.Actor, Delegate: pl.Delegate, CommandTypes: slices.Clone(pl.CommandTypes),
		WorkItemIDs: slices.Clone(pl.WorkItemIDs), ExpiresAt: pl.ExpiresAt, ParentDelegationID: pl.ParentDelegationID,
	})
	nm.Revision++
	return EventDraft{Type: protocol.EvtMembershipDelegationGranted, Aggregate: MembershipAggregate(pl.Delegate), Revision: nm.Revision, Actor: in.Actor, Payload: &nm}, nil
}

// Ensure gives principal the role, joining the Group when new, and returns
// the membership.changed to append (none when it holds the role already).
// The principal's membership epoch moves, so commands prepared under the
// old roles are fenced. A coordinator's assignment makes it a member so.
func (ms Members) Ensure(groupID string, principal protocol.Actor, role protocol.Role, by protocol.Actor, now time.Time) []EventDraft {
	m := ms.Active(principal)
	if m != nil && slices.Contains(m.Roles, role) {
		return nil
	}
	roles := protocol.List[protocol.Role]{role}
	if m != nil {
		roles = append(slices.Clone(m.Roles), role)
	}
	return []EventDraft{ms.set(groupID, principal, roles, by, now)}
}

// set drafts principal's membership with roles: a rejoin or a change moves
// the epoch and revision; delegations survive a change of an active one.
func (ms Members) set(groupID string, principal protocol.Actor, roles protocol.List[protocol.Role], by protocol.Actor, now time.Time) EventDraft {
	old := ms[MemberKey(principal)]
	m := &protocol.Membership{GroupID: groupID, Principal: principal, Roles: roles, State: protocol.MembershipActive, MembershipEpoch: 1, Revision: 1}
	if old != nil {
		m.MembershipEpoch, m.Revision, m.JoinedAt = old.MembershipEpoch+1, old.Revision+1, old.JoinedAt
		if old.State == protocol.MembershipActive {
			m.Delegations = old.Delegations
		}
	}
	if old == nil || old.State != protocol.MembershipActive {
		m.JoinedAt = protocol.NewTime(now)
	}
	return EventDraft{Type: protocol.EvtMembershipChanged, Aggregate: MembershipAggregate(principal), Revision: m.Revision, Actor: by, Payload: m}
}

// checkRevision is the compare-and-set of spec 15.3 on a membership: an
// expectedRevision other than the principal's current membership revision
// (0 before it first joined) is REVISION_CONFLICT.
func (ms Members) checkRevision(in Input, principal protocol.Actor) error {
	var current uint64
	if m := ms[MemberKey(principal)]; m != nil {
		current = m.Revision
	}
	return CheckRevision(in.ExpectedRevision, protocol.AggregateMembership, MembershipAggregate(principal).ID, current)
}

// DelegationDepth is the length of the chain pl would end (1 without a
// parent), or why the chain is malformed: cyclic, or through an unknown
// delegation.
func (ms Members) DelegationDepth(pl *protocol.GrantDelegationPayload) (int, error) {
	depth, seen := 1, map[string]bool{pl.DelegationID: true}
	for parent := pl.ParentDelegationID; parent != ""; depth++ {
		if seen[parent] {
			return 0, protocol.InvalidCommand("delegation chain through %s is cyclic", parent).At("/payload/parentDelegationId")
		}
		seen[parent] = true
		d := ms.delegation(parent)
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

func (ms Members) delegation(id string) *protocol.Delegation {
	for _, m := range ms {
		for i := range m.Delegations {
			if m.Delegations[i].DelegationID == id {
				return &m.Delegations[i]
			}
		}
	}
	return nil
}

// Delegated reports whether in's actor holds a live delegation from the
// current coordinator covering the command (spec 10.2 "scope delegate");
// the authority sets Input.Delegated from it.
func (ms Members) Delegated(g *Group, in Input, now time.Time) bool {
	m := ms[MemberKey(in.Actor)]
	if m == nil || g.Mission == nil || g.Mission.Coordinator == nil {
		return false
	}
	item := workItemOf(in.Payload)
	for _, d := range m.Delegations {
		if d.Delegator.ID != g.Mission.Coordinator.AgentID || !d.ExpiresAt.After(now) {
			continue
		}
		if !slices.Contains(d.CommandTypes, string(in.Type)) {
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

// An agent holds in a Group only roles its Agent Card declares: a card
// saying "worker" cannot be made coordinator, an "observer" cannot be
// given work.

// CardAllows refuses a role the agent's registered card does not declare
// (AUTH_FORBIDDEN: the agent lacks the eligibility), and an agent without
// a card (INVALID_COMMAND). Roles of humans are not carried by cards.
func CardAllows(dir Directory, principal protocol.Actor, role protocol.Role, ptr string) error {
	if principal.Kind != protocol.ActorAgent {
		return nil
	}
	c, ok := dir.Card(principal.ID)
	if !ok {
		return protocol.InvalidCommand("agent %s has no registered Agent Card", principal.ID).At(ptr)
	}
	if !slices.Contains(c.Roles, role) {
		e := protocol.Forbidden("the Agent Card of %s does not declare the %s role", principal.ID, role).At(ptr)
		return protocol.WithDetails(e, "role", string(role), "cardRoles", rolesOf(c.Roles))
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

// CheckCardRoles holds the command to the registered cards before the
// state machines decide it: mission.assign_coordinator to an agent whose
// card declares the coordinator role, work.offer to active members holding
// the worker role by membership and by card (a candidate that is no member
// is MEMBERSHIP_REQUIRED, one without the role AUTH_FORBIDDEN, at its
// pointer).
func (ms Members) CheckCardRoles(groupID string, in Input, dir Directory) error {
	switch pl := in.Payload.(type) {
	case *protocol.AssignCoordinatorPayload:
		return CardAllows(dir, protocol.Actor{Kind: protocol.ActorAgent, ID: pl.AgentID}, protocol.RoleCoordinator, "/payload/agentId")
	case *protocol.OfferWorkPayload:
		for i, c := range pl.Candidates {
			ptr := "/payload/candidates/" + strconv.Itoa(i) + "/agentId"
			who := protocol.Actor{Kind: protocol.ActorAgent, ID: c.AgentID}
			if err := CheckCandidate(groupID, c.AgentID, ms.Active(who), ptr); err != nil {
				return err
			}
			if err := CardAllows(dir, who, protocol.RoleWorker, ptr); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckCandidate is the membership rule for a work.offer candidate: an
// active member (m is its membership, nil for none) holding the worker
// role. One that is no member is MEMBERSHIP_REQUIRED, one without the role
// AUTH_FORBIDDEN, at ptr. The authority refuses an offer by it
// (CheckCardRoles, which also asks the Agent Card) and a coordinator
// chooses its candidates by it.
func CheckCandidate(groupID, agentID string, m *protocol.Membership, ptr string) error {
	if m == nil || m.State != protocol.MembershipActive {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeMembershipRequired, "candidate %s is not a member of group %s", agentID, groupID).At(ptr),
			"agentId", agentID)
	}
	if !slices.Contains(m.Roles, protocol.RoleWorker) {
		e := protocol.Forbidden("candidate %s does not hold the worker role in group %s", agentID, groupID).At(ptr)
		return protocol.WithDetails(e, "role", string(protocol.RoleWorker), "memberRoles", rolesOf(m.Roles))
	}
	return nil
}
