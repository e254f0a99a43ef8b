package group

import (
	"errors"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Cooperation-override grants (spec 20): the MissionOwner or an
// Organization policy service lets one named command through one named
// policy, once, before an expiry. A refusal by a policy names it in its
// details; a command citing a grant that binds it exactly passes that
// policy and consumes the grant.

// The policies a grant may name.
const (
	PolicyMessageRate     = "messageRate"
	PolicyProposalRate    = "proposalRate"
	PolicyOpenWorkItems   = "maxOpenWorkItems"
	PolicyActiveWorkItems = "maxActiveWorkItems"
	PolicyQueuedWorkItems = "maxQueuedWorkItems"
	PolicyClarifications  = "maxOpenClarifications"
	PolicyDuplicateWork   = "maxDuplicateWorkItems"
	PolicyDelegationDepth = "maxDelegationDepth"
)

// Overridable are the policies a grant may name.
var Overridable = []string{PolicyMessageRate, PolicyProposalRate, PolicyOpenWorkItems, PolicyActiveWorkItems,
	PolicyQueuedWorkItems, PolicyClarifications, PolicyDuplicateWork, PolicyDelegationDepth}

// Grant is a cooperation-override grant and its consumption, as the
// authority stores it.
type Grant struct {
	Grant      protocol.CooperationOverrideGrant `json:"grant"`
	Revision   uint64                            `json:"revision"`
	ConsumedBy string                            `json:"consumedBy,omitempty"`
}

// Grants are a Group's grants by id.
type Grants map[string]*Grant

// PolicyError is a refusal by a named policy, which a grant may override.
func PolicyError(code protocol.Code, policy string, format string, args ...any) *protocol.Error {
	return protocol.WithDetails(protocol.Errorf(code, format, args...), "policy", policy, "override", "policy.grant_cooperation_override")
}

// PolicyOf is the policy that refused err, "" when no policy did.
func PolicyOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != nil {
		if p, ok := pe.Details["policy"].(string); ok {
			return p
		}
	}
	return ""
}

func policyAggregate(id string) protocol.Aggregate {
	return protocol.Aggregate{Kind: protocol.AggregatePolicy, ID: id}
}

// DecideGrant decides policy.grant_cooperation_override: only the
// MissionOwner or an Organization policy service may issue one, and it
// must bind this Mission and Group, its approver and a future expiry.
func (gr Grants) DecideGrant(g *Group, in Input, dir Directory, now time.Time) (EventDraft, error) {
	p, err := payloadAs[protocol.CooperationOverrideGrant](in)
	if err != nil {
		return EventDraft{}, err
	}
	grant := *p
	owner := g.Mission != nil && in.Actor == g.Mission.Owner
	if !owner && !(in.Actor.Kind == protocol.ActorService && dir.PolicyService(in.Actor.ID)) {
		return EventDraft{}, protocol.Forbidden("only the MissionOwner or an Organization policy actor may grant a cooperation override")
	}
	if g.Mission == nil || grant.MissionID != g.Mission.MissionID || grant.GroupID != g.GroupID {
		return EventDraft{}, protocol.InvalidCommand("the grant must bind this Group's Mission").At("/payload/missionId")
	}
	if grant.Approver != in.Actor {
		return EventDraft{}, protocol.InvalidCommand("the approver must be the issuing actor").At("/payload/approver")
	}
	if !slices.Contains(Overridable, grant.Policy) {
		return EventDraft{}, protocol.InvalidCommand("unknown policy %q", grant.Policy).At("/payload/policy")
	}
	if !grant.ExpiresAt.After(now) || grant.ExpiresAt.Before(grant.GrantedAt.Time) {
		return EventDraft{}, protocol.InvalidCommand("the grant must expire in the future, after it is granted").At("/payload/expiresAt")
	}
	if _, dup := gr[grant.GrantID]; dup {
		return EventDraft{}, protocol.InvalidCommand("grant %s already exists", grant.GrantID).At("/payload/grantId")
	}
	return EventDraft{Type: protocol.EvtPolicyCooperationOverrideGranted, Aggregate: policyAggregate(grant.GrantID), Revision: 1, Actor: in.Actor, Payload: &grant}, nil
}

// Match checks that the grant a command cites exists, is unexpired and
// unconsumed and binds exactly this command (spec 20).
func (gr Grants) Match(g *Group, in Input, id string, now time.Time) (*Grant, error) {
	r := gr[id]
	deny := func(format string, args ...any) (*Grant, error) {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "cooperation override %s: "+format, append([]any{id}, args...)...).At("/cooperationOverrideGrantId")
	}
	switch {
	case r == nil:
		return deny("no such grant in this Group")
	case r.ConsumedBy != "":
		return deny("already consumed by %s", r.ConsumedBy)
	case !r.Grant.ExpiresAt.After(now):
		return deny("expired at %s", r.Grant.ExpiresAt)
	case g.Mission == nil || r.Grant.MissionID != g.Mission.MissionID || r.Grant.GroupID != g.GroupID:
		return deny("bound to another Mission or Group")
	case r.Grant.Grantee != in.Actor:
		return deny("granted to %s %s, not %s", r.Grant.Grantee.Kind, r.Grant.Grantee.ID, in.Actor.ID)
	case r.Grant.TargetCommandType != in.Type:
		return deny("for %s, not %s", r.Grant.TargetCommandType, in.Type)
	case r.Grant.TargetActionID != in.ActionID:
		return deny("for action %s, not %s", r.Grant.TargetActionID, in.ActionID)
	}
	return r, nil
}

// Gate lets a matched grant through the policy it names: refused is the
// policy check's verdict. It returns the grant to consume (nil when none
// applies) and the refusal that stands.
func Gate(grant *Grant, refused error) (*Grant, error) {
	if refused == nil {
		return grant, nil
	}
	if grant != nil && PolicyOf(refused) == grant.Grant.Policy {
		return grant, nil
	}
	return nil, refused
}

// Consume drafts the consumption of a grant by the accepted command.
func Consume(r *Grant, in Input) EventDraft {
	return EventDraft{Type: protocol.EvtCooperationOverrideConsumed, Aggregate: policyAggregate(r.Grant.GrantID), Revision: r.Revision + 1, Actor: in.Actor,
		Payload: &OverrideConsumed{GrantID: r.Grant.GrantID, Policy: r.Grant.Policy, ConsumedByActionID: in.ActionID, TargetCommandType: string(in.Type)}}
}

// Fold applies one grant event; it reports whether the grants changed.
func (gr Grants) Fold(d EventDraft) bool {
	switch p := d.Payload.(type) {
	case *protocol.CooperationOverrideGrant:
		gr[p.GrantID] = &Grant{Grant: *p, Revision: d.Revision}
	case *OverrideConsumed:
		old := gr[p.GrantID]
		if old == nil {
			return false
		}
		ng := *old
		ng.ConsumedBy, ng.Revision = p.ConsumedByActionID, d.Revision
		gr[p.GrantID] = &ng
	default:
		return false
	}
	return true
}
