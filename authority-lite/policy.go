package authoritylite

import (
	"errors"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Spec 20 controls. Each limit has a policy name; a refusal names it in
// details, and a cooperation-override grant for exactly that command lets
// it through once.

// The policy names a grant may cite.
const (
	PolicyMessageRate     = "messageRate"
	PolicyProposalRate    = "proposalRate"
	PolicyOpenWorkItems   = "maxOpenWorkItems"
	PolicyDelegationDepth = "maxDelegationDepth"
	// PolicyMissionCreateRate bounds each human's new Groups; no grant
	// lifts it (a grant binds a Group, and the Group does not exist yet).
	PolicyMissionCreateRate = "missionCreateRate"
	defaultMaxOpenWorkItem  = 256
)

// Policy holds the Organization's limits on one Group.
type Policy struct {
	// MaxOpenWorkItems bounds WorkItems not yet verified, cancelled or
	// failed (active and queued work, spec 20).
	MaxOpenWorkItems int
	// MaxDelegationDepth bounds re-delegation chains (0: MaxDelegationDepth).
	MaxDelegationDepth int
}

// grantRecord is a cooperation-override grant and its consumption.
type grantRecord struct {
	Grant      protocol.CooperationOverrideGrant `json:"grant"`
	Revision   uint64                            `json:"revision"`
	ConsumedBy string                            `json:"consumedBy,omitempty"`
}

// policyError is a refusal by a named policy.
func policyError(code protocol.Code, policy string, format string, args ...any) *protocol.Error {
	return protocol.WithDetails(protocol.Errorf(code, format, args...), "policy", policy, "override", "policy.grant_cooperation_override")
}

func policyOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != nil {
		if p, ok := pe.Details["policy"].(string); ok {
			return p
		}
	}
	return ""
}

// checkPolicy applies the limits that depend on the command and Group.
func (s *Service) checkPolicy(c *call, gs *groupState) error {
	switch c.cmd.Type {
	case protocol.CmdMessagePost:
		if err := s.rates.allow(c.cmd.Actor, c.now); err != nil {
			return protocol.WithDetails(err.(*protocol.Error), "policy", PolicyMessageRate)
		}
	case protocol.CmdWorkPropose:
		if err := s.proposals.allow(c.cmd.Actor, c.now); err != nil {
			return protocol.WithDetails(err.(*protocol.Error), "policy", PolicyProposalRate)
		}
	case protocol.CmdMembershipGrantDelegation:
		max := s.cfg.Policy.MaxDelegationDepth
		if max <= 0 {
			max = MaxDelegationDepth
		}
		// A malformed chain is not a policy matter: dispatch refuses it.
		if depth, err := delegationDepth(gs, c.payload.(*protocol.GrantDelegationPayload)); err == nil && depth > max {
			return policyError(protocol.CodeAuthForbidden, PolicyDelegationDepth, "delegation depth %d exceeds the policy's %d", depth, max).At("/payload/parentDelegationId")
		}
	case protocol.CmdWorkAuthorize:
		max := s.cfg.Policy.MaxOpenWorkItems
		if max <= 0 {
			max = defaultMaxOpenWorkItem
		}
		open := 0
		for _, w := range gs.g.Items {
			switch w.State {
			case protocol.WorkVerified, protocol.WorkCancelled, protocol.WorkFailed:
			default:
				open++
			}
		}
		if open >= max {
			return policyError(protocol.CodeAuthForbidden, PolicyOpenWorkItems, "group %s has %d open WorkItems, the policy allows %d", gs.id, open, max)
		}
	}
	return nil
}

// policyGate runs checkPolicy, letting a matching grant override the
// exceeded policy. It returns the grant to consume, if any.
func (s *Service) policyGate(c *call, gs *groupState) (*grantRecord, error) {
	var grant *grantRecord
	if id := c.cmd.CooperationOverrideGrantID; id != "" {
		g, err := s.matchGrant(c, gs, id)
		if err != nil {
			return nil, err
		}
		grant = g
	}
	if err := s.checkPolicy(c, gs); err != nil {
		if grant != nil && policyOf(err) == grant.Grant.Policy {
			return grant, nil
		}
		return nil, err
	}
	return grant, nil
}

// matchGrant checks that a cited grant exists, is unexpired and unconsumed
// and binds exactly this command (spec 20).
func (s *Service) matchGrant(c *call, gs *groupState, id string) (*grantRecord, error) {
	g := gs.grants[id]
	deny := func(format string, args ...any) (*grantRecord, error) {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "cooperation override %s: "+format, append([]any{id}, args...)...).At("/cooperationOverrideGrantId")
	}
	switch {
	case g == nil:
		return deny("no such grant in this Group")
	case g.ConsumedBy != "":
		return deny("already consumed by %s", g.ConsumedBy)
	case !g.Grant.ExpiresAt.After(c.now):
		return deny("expired at %s", g.Grant.ExpiresAt)
	case gs.g.Mission == nil || g.Grant.MissionID != gs.g.Mission.MissionID || g.Grant.GroupID != gs.id:
		return deny("bound to another Mission or Group")
	case g.Grant.Grantee != c.cmd.Actor:
		return deny("granted to %s %s, not %s", g.Grant.Grantee.Kind, g.Grant.Grantee.ID, c.cmd.Actor.ID)
	case g.Grant.TargetCommandType != c.cmd.Type:
		return deny("for %s, not %s", g.Grant.TargetCommandType, c.cmd.Type)
	case g.Grant.TargetActionID != c.cmd.ActionID:
		return deny("for action %s, not %s", g.Grant.TargetActionID, c.cmd.ActionID)
	}
	return g, nil
}

// consumeGrant drafts the consumption event, bound to the accepted command.
func (s *Service) consumeGrant(c *call, gs *groupState, g *grantRecord, p *pending) {
	ng := *g
	ng.ConsumedBy = c.cmd.ActionID
	ng.Revision++
	gs.grants[g.Grant.GrantID] = &ng
	p.grants = true
	p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtCooperationOverrideConsumed,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregatePolicy, ID: g.Grant.GrantID}, Revision: ng.Revision, Actor: c.cmd.Actor,
		Payload: &group.OverrideConsumed{GrantID: g.Grant.GrantID, Policy: g.Grant.Policy, ConsumedByActionID: c.cmd.ActionID, TargetCommandType: string(c.cmd.Type)}})
}

// grantOverride decides policy.grant_cooperation_override: only the
// MissionOwner or an Organization policy service may issue one, and it
// must bind this Mission and Group, its approver and a future expiry.
func (s *Service) grantOverride(c *call, gs *groupState, p *pending) error {
	g := *c.payload.(*protocol.CooperationOverrideGrant)
	owner := gs.g.Mission != nil && c.cmd.Actor == gs.g.Mission.Owner
	if !owner && !(c.cmd.Actor.Kind == protocol.ActorService && s.org.isPolicyService(c.cmd.Actor.ID)) {
		return protocol.Forbidden("only the MissionOwner or an Organization policy actor may grant a cooperation override")
	}
	if gs.g.Mission == nil || g.MissionID != gs.g.Mission.MissionID || g.GroupID != gs.id {
		return protocol.InvalidCommand("the grant must bind this Group's Mission").At("/payload/missionId")
	}
	if g.Approver != c.cmd.Actor {
		return protocol.InvalidCommand("the approver must be the issuing actor").At("/payload/approver")
	}
	switch g.Policy {
	case PolicyMessageRate, PolicyProposalRate, PolicyOpenWorkItems, PolicyDelegationDepth:
	default:
		return protocol.InvalidCommand("unknown policy %q", g.Policy).At("/payload/policy")
	}
	if !g.ExpiresAt.After(c.now) || g.ExpiresAt.Before(g.GrantedAt.Time) {
		return protocol.InvalidCommand("the grant must expire in the future, after it is granted").At("/payload/expiresAt")
	}
	if _, dup := gs.grants[g.GrantID]; dup {
		return protocol.InvalidCommand("grant %s already exists", g.GrantID).At("/payload/grantId")
	}
	gs.grants[g.GrantID] = &grantRecord{Grant: g, Revision: 1}
	p.grants = true
	p.drafts = append(p.drafts, group.EventDraft{Type: protocol.EvtPolicyCooperationOverrideGranted,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregatePolicy, ID: g.GrantID}, Revision: 1, Actor: c.cmd.Actor, Payload: &g})
	return nil
}
