package authoritylite

import (
	"errors"
	"fmt"
	"math"
	"strings"

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
	PolicyActiveWorkItems = "maxActiveWorkItems"
	PolicyQueuedWorkItems = "maxQueuedWorkItems"
	PolicyClarifications  = "maxOpenClarifications"
	PolicyDuplicateWork   = "maxDuplicateWorkItems"
	PolicyDelegationDepth = "maxDelegationDepth"
	// PolicyMissionCreateRate bounds each human's new Groups; no grant
	// lifts it (a grant binds a Group, and the Group does not exist yet).
	PolicyMissionCreateRate = "missionCreateRate"
)

// Defaults of the counted limits: well above what a Group of a few
// workers holds, so that they catch runaway decomposition, not work.
const (
	defaultMaxOpenWorkItems   = 256
	defaultMaxActiveWorkItems = 128
	defaultMaxQueuedWorkItems = 256
	defaultMaxClarifications  = 16
	defaultMaxDuplicateWork   = 32
	defaultSoftLimit          = 0.8
)

// Policy holds the Organization's limits on one Group (spec 20). Zero
// fields take the defaults above.
type Policy struct {
	// MaxOpenWorkItems bounds WorkItems not yet verified, cancelled or
	// failed, checked at work.authorize.
	MaxOpenWorkItems int
	// MaxActiveWorkItems bounds the items running under a lease, checked
	// at work.start; MaxQueuedWorkItems the items accepted and waiting to
	// start, checked at work.accept_offer. Neither refusal drops the item:
	// it stays queued or offered, and the command may be sent again.
	MaxActiveWorkItems int
	MaxQueuedWorkItems int
	// MaxOpenClarifications bounds unresolved clarification rounds: items
	// blocked on a clarification, checked at work.block.
	MaxOpenClarifications int
	// MaxDuplicateWorkItems bounds open items decomposed from the same work
	// (the same goal, required capabilities and inputs), checked at
	// work.authorize.
	MaxDuplicateWorkItems int
	// MaxDelegationDepth bounds re-delegation chains (0: MaxDelegationDepth).
	MaxDelegationDepth int
	// SoftLimit is the fraction of a counted limit at which the Group is
	// told, before any refusal (a policy.softLimit message from the
	// authority, docs/wire.md); 0 takes 0.8, a negative value tells nothing.
	SoftLimit float64
}

// CountedPolicies are the limits a Policy counts in a Group, by name.
var CountedPolicies = []string{PolicyOpenWorkItems, PolicyActiveWorkItems, PolicyQueuedWorkItems, PolicyClarifications, PolicyDuplicateWork}

// field is the Policy field of a limit and its default.
func (p *Policy) field(name string) (*int, int) {
	switch name {
	case PolicyOpenWorkItems:
		return &p.MaxOpenWorkItems, defaultMaxOpenWorkItems
	case PolicyActiveWorkItems:
		return &p.MaxActiveWorkItems, defaultMaxActiveWorkItems
	case PolicyQueuedWorkItems:
		return &p.MaxQueuedWorkItems, defaultMaxQueuedWorkItems
	case PolicyClarifications:
		return &p.MaxOpenClarifications, defaultMaxClarifications
	case PolicyDuplicateWork:
		return &p.MaxDuplicateWorkItems, defaultMaxDuplicateWork
	case PolicyDelegationDepth:
		return &p.MaxDelegationDepth, MaxDelegationDepth
	}
	return nil, 0
}

// limit is the hard limit of a counted policy.
func (p Policy) limit(name string) int {
	f, d := p.field(name)
	if f == nil || *f <= 0 {
		return d
	}
	return *f
}

// Set sets the limit of a counted policy or maxDelegationDepth by its name
// (authority serve --policy-limit NAME=N).
func (p *Policy) Set(name string, n int) error {
	f, _ := p.field(name)
	switch {
	case f == nil:
		return fmt.Errorf("unknown policy %q (one of %s, %s)", name, strings.Join(CountedPolicies, ", "), PolicyDelegationDepth)
	case n <= 0:
		return fmt.Errorf("policy %s: want a positive limit, not %d", name, n)
	}
	*f = n
	return nil
}

// soft is the count at which the Group is told, 0 for never.
func (p Policy) soft(limit int) int {
	f := p.SoftLimit
	if f == 0 {
		f = defaultSoftLimit
	}
	if f < 0 || f >= 1 {
		return 0
	}
	return max(1, int(math.Ceil(f*float64(limit))))
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
// It also returns the counted limits the command brings to their soft
// threshold; every limit is checked before any is returned.
func (s *Service) checkPolicy(c *call, gs *groupState) ([]count, error) {
	switch c.cmd.Type {
	case protocol.CmdMessagePost:
		if err := s.rates.allow(c.cmd.Actor, c.now); err != nil {
			return nil, protocol.WithDetails(err.(*protocol.Error), "policy", PolicyMessageRate)
		}
	case protocol.CmdWorkPropose:
		if err := s.proposals.allow(c.cmd.Actor, c.now); err != nil {
			return nil, protocol.WithDetails(err.(*protocol.Error), "policy", PolicyProposalRate)
		}
	case protocol.CmdMembershipGrantDelegation:
		max := s.cfg.Policy.limit(PolicyDelegationDepth)
		// A malformed chain is not a policy matter: dispatch refuses it.
		if depth, err := delegationDepth(gs, c.payload.(*protocol.GrantDelegationPayload)); err == nil && depth > max {
			return nil, policyError(protocol.CodeAuthForbidden, PolicyDelegationDepth, "delegation depth %d exceeds the policy's %d", depth, max).At("/payload/parentDelegationId")
		}
	}
	var near []count
	for _, n := range countsFor(c, gs) {
		n.max = s.cfg.Policy.limit(n.policy)
		if n.n >= n.max {
			return nil, policyError(protocol.CodeAuthForbidden, n.policy, "group %s has %d %s, the policy allows %d", gs.id, n.n, n.what, n.max)
		}
		if soft := s.cfg.Policy.soft(n.max); soft > 0 && n.n+1 == soft {
			near = append(near, n)
		}
	}
	return near, nil
}

// policyGate runs checkPolicy, letting a matching grant override the
// exceeded policy. It returns the grant to consume, if any.
// near are the counted limits the command brings to their soft threshold.
func (s *Service) policyGate(c *call, gs *groupState) (grant *grantRecord, near []count, err error) {
	if id := c.cmd.CooperationOverrideGrantID; id != "" {
		if grant, err = s.matchGrant(c, gs, id); err != nil {
			return nil, nil, err
		}
	}
	near, err = s.checkPolicy(c, gs)
	if err != nil {
		if grant != nil && policyOf(err) == grant.Grant.Policy {
			return grant, nil, nil
		}
		return nil, nil, err
	}
	return grant, near, nil
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
	case PolicyMessageRate, PolicyProposalRate, PolicyOpenWorkItems, PolicyActiveWorkItems, PolicyQueuedWorkItems,
		PolicyClarifications, PolicyDuplicateWork, PolicyDelegationDepth:
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
