package authoritylite

import (
	"fmt"
	"math"
	"strings"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Spec 20 controls. Each limit has a policy name; a refusal names it in
// details, and a cooperation-override grant for exactly that command lets
// it through once.

// The policy names a grant may cite (group.Overridable).
const (
	PolicyMessageRate     = group.PolicyMessageRate
	PolicyProposalRate    = group.PolicyProposalRate
	PolicyOpenWorkItems   = group.PolicyOpenWorkItems
	PolicyActiveWorkItems = group.PolicyActiveWorkItems
	PolicyQueuedWorkItems = group.PolicyQueuedWorkItems
	PolicyClarifications  = group.PolicyClarifications
	PolicyDuplicateWork   = group.PolicyDuplicateWork
	PolicyDelegationDepth = group.PolicyDelegationDepth
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

// grantRecord is a cooperation-override grant and its consumption
// (group.Grant, decided in group/grants.go).
type grantRecord = group.Grant

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
		if depth, err := gs.members.DelegationDepth(c.payload.(*protocol.GrantDelegationPayload)); err == nil && depth > max {
			return nil, group.PolicyError(protocol.CodeAuthForbidden, PolicyDelegationDepth, "delegation depth %d exceeds the policy's %d", depth, max).At("/payload/parentDelegationId")
		}
	}
	var near []count
	for _, n := range countsFor(c, gs) {
		n.max = s.cfg.Policy.limit(n.policy)
		if n.n >= n.max {
			return nil, group.PolicyError(protocol.CodeAuthForbidden, n.policy, "group %s has %d %s, the policy allows %d", gs.id, n.n, n.what, n.max)
		}
		if soft := s.cfg.Policy.soft(n.max); soft > 0 && n.n+1 == soft {
			near = append(near, n)
		}
	}
	return near, nil
}

// policyGate runs checkPolicy, letting a matching grant override the
// exceeded policy (group.Gate). It returns the grant to consume, if any.
// near are the counted limits the command brings to their soft threshold.
func (s *Service) policyGate(c *call, gs *groupState) (grant *grantRecord, near []count, err error) {
	if id := c.cmd.CooperationOverrideGrantID; id != "" {
		if grant, err = gs.grants.Match(gs.g, group.InputFromCommand(c.cmd, c.payload), id, c.now); err != nil {
			return nil, nil, err
		}
	}
	near, err = s.checkPolicy(c, gs)
	if grant, err = group.Gate(grant, err); err != nil {
		return nil, nil, err
	}
	return grant, near, nil
}
