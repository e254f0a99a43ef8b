package item

import (
	"fmt"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Admission is everything admission control (spec 10.3) looks at. It is
// plain data: Decide reads no clock and does no I/O.
type Admission struct {
	Now     time.Time
	AgentID string
	// Card is what this worker declared: its capabilities and slots.
	Capabilities []protocol.Capability
	Slots        int
	// Committed counts accepted, unfinished items (queued and running);
	// Capacity is the most the worker commits to at once.
	Committed int
	Capacity  int
	// The offered WorkItem as projected: its owner, the standing offer
	// (OfferedToMe: its candidates name AgentID; OfferExpires zero: no
	// expiry known) and its dependencies; Contract its full contract.
	Owner        string
	OfferID      string
	OfferedToMe  bool
	OfferExpires time.Time
	Dependencies []Dependency
	Contract     protocol.WorkContract
	// MissionActive is false once the Mission is terminal or archived.
	MissionActive bool
	// EarliestStart and Estimate are the scheduler's view: when a slot is
	// expected to take the item, and how long it runs.
	EarliestStart time.Time
	Estimate      time.Duration
	Confidence    float64
	// Completion is the scheduler's estimated completion (its latest
	// start plus Estimate); zero: EarliestStart plus Estimate.
	Completion time.Time
	// Expected is the item's expected cost in every budget dimension (the
	// worker's estimates for the capabilities it requires); its wall-clock
	// seconds are Estimate's. Held is what the accepted, unfinished items
	// already hold, and Limits what the worker commits to at once (a nil
	// dimension has no cap).
	Expected protocol.Usage
	Held     protocol.Usage
	Limits   protocol.Budgets
	// Reliability is this worker's track record per capability id.
	Reliability map[string]protocol.ReliabilityRecord
	// UnknownCritical are the critical extensions of the event that carried
	// the contract (the offer, or the revision) that this worker does not
	// interpret: it may not take part in a transition that depends on
	// them (spec 18).
	UnknownCritical []string
	// Renewal judges a substantially revised contract of an item this
	// worker already owns (spec 10.1): the ownership, not a standing
	// offer, is the authorization, and the item is already one of the
	// Committed, so capacity is not judged again.
	Renewal bool
}

// AdmissionDecision is the outcome: accept (Rejection nil) or refuse with a
// structured reason; Basis is recorded either way.
type AdmissionDecision struct {
	Rejection *protocol.AdmissionRejection
	Basis     protocol.SelectionBasis
}

// Accepted reports whether the offer is accepted.
func (d AdmissionDecision) Accepted() bool { return d.Rejection == nil }

// The policy rules admission names in a selection basis.
const (
	RuleAdmitAuthorization = "admission.authorization.offered-to-agent"
	RuleAdmitOwnership     = "admission.authorization.current-owner"
	RuleAdmitCapability    = "admission.capability.version-match"
	RuleAdmitExtensions    = "admission.capability.critical-extensions-known"
	RuleAdmitCapacity      = "admission.capacity.queue-depth"
	RuleAdmitDeadline      = "admission.deadline.estimated-completion"
	RuleAdmitDependency    = "admission.dependency.satisfiable"
	RuleAdmitBudget        = "admission.budget.covers-expected-cost"
	RuleAdmitBudgetLimit   = "admission.budget.within-worker-limits"
)

// Decide is admission control: whether to accept an offer. The checks run in the order of
// spec 10.3's list; the first failing one is the reason. Acceptance is a
// scheduling commitment, not an immediate start, so pending dependencies
// do not refuse an offer; a dependency that can no longer meet its policy
// does.
func (in Admission) Decide() AdmissionDecision {
	b := protocol.SelectionBasis{
		CapabilityMatches:   protocol.List[protocol.CapabilityMatch]{},
		ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
		PolicyRulesApplied:  protocol.List[string]{},
		AvailabilityEstimate: protocol.AvailabilityEstimate{
			EarliestStart: protocol.NewTime(in.EarliestStart), Confidence: clamp01(in.Confidence),
		},
	}
	want := in.Expected
	want.WallClockSeconds = in.Estimate.Seconds()
	b.ExpectedCost = budgetsOf(want)
	// The rule of each check is recorded before it runs, so a refusal's
	// basis ends with the rule that refused.
	refuse := func(r protocol.AdmissionReason, format string, args ...any) AdmissionDecision {
		return AdmissionDecision{Rejection: &protocol.AdmissionRejection{Reason: r, Detail: fmt.Sprintf(format, args...)}, Basis: b}
	}

	// Authorization: the standing offer names this agent, is live, and the
	// Mission can still run work; for a renewal, this agent owns the item.
	if in.Renewal {
		b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitOwnership)
	} else {
		b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitAuthorization)
	}
	switch {
	case in.Renewal && in.Owner != in.AgentID:
		return refuse(protocol.RejectAuthorization, "%s does not own the item", in.AgentID)
	case !in.Renewal && !in.OfferedToMe:
		return refuse(protocol.RejectAuthorization, "the standing offer does not name %s", in.AgentID)
	case !in.Renewal && !in.OfferExpires.IsZero() && !in.Now.Before(in.OfferExpires):
		return refuse(protocol.RejectAuthorization, "offer %s expired at %s", in.OfferID, protocol.NewTime(in.OfferExpires))
	case !in.MissionActive:
		return refuse(protocol.RejectAuthorization, "the Mission is not active")
	}
	b.AuthorizationEligible = true

	// Capability: every required capability in a satisfying version.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitCapability)
	if len(in.Contract.RequiredCapabilities) == 0 {
		return refuse(protocol.RejectCapability, "the contract names no required capability")
	}
	if missing := matchCapabilities(in, &b); missing != "" {
		return refuse(protocol.RejectCapability, "no capability %s", missing)
	}

	// Extensions: every critical one the contract depends on is known.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitExtensions)
	if len(in.UnknownCritical) > 0 {
		return refuse(protocol.RejectCapability, "the contract depends on critical extension %s, which this worker does not interpret", strings.Join(in.UnknownCritical, ", "))
	}

	// Capacity: a bounded number of commitments.
	if !in.Renewal {
		b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitCapacity)
	}
	if !in.Renewal && in.Committed >= in.Capacity {
		return refuse(protocol.RejectCapacity, "%d items committed, capacity %d for %d slots", in.Committed, in.Capacity, in.Slots)
	}

	// Deadline: the estimated completion must not be after it.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitDeadline)
	if dl := in.Contract.Deadline.Time; !dl.IsZero() {
		done := in.Completion
		if done.IsZero() {
			done = in.EarliestStart.Add(in.Estimate)
		}
		if done.After(dl) {
			return refuse(protocol.RejectDeadline, "estimated completion %s is after the deadline %s",
				done.UTC().Format(time.RFC3339), dl.UTC().Format(time.RFC3339))
		}
	}

	// Dependency: none may be in a state its policy can never accept.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitDependency)
	for _, d := range in.Dependencies {
		if unsatisfiable(d) {
			return refuse(protocol.RejectDependency, "dependency %s is %s, its policy %s can no longer be met", d.WorkItemID, d.State, d.Policy)
		}
	}

	// Budget: in every dimension the contract's budget covers the expected
	// cost, and the worker's limits cover it on top of what its accepted
	// items hold (a renewal's own hold is not in Held).
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitBudget)
	if dim := in.Contract.Budgets.Exceeded(want); dim != "" {
		used, limit := dimension(dim, want, in.Contract.Budgets)
		return refuse(protocol.RejectBudget, "%s budget %g is below the expected cost %g", dim, limit, used)
	}
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitBudgetLimit)
	if total := in.Held.Add(want); in.Limits.Exceeded(total) != "" {
		dim := in.Limits.Exceeded(total)
		held, _ := dimension(dim, in.Held, in.Limits)
		used, limit := dimension(dim, want, in.Limits)
		return refuse(protocol.RejectBudget, "%s: %g expected on top of %g held by accepted items exceeds the worker's limit %g", dim, used, held, limit)
	}
	return AdmissionDecision{Basis: b}
}

// matchCapabilities records in b how each required capability is matched
// and the track record of each; it returns the first one the worker lacks
// ("ID in version V"), "" when none.
func matchCapabilities(in Admission, b *protocol.SelectionBasis) string {
	for _, req := range in.Contract.RequiredCapabilities {
		offered := ""
		for _, c := range in.Capabilities {
			if c.ID == req.ID && protocol.VersionSatisfies(c.Version, req.Version) {
				offered = c.Version
				break
			}
		}
		if offered == "" {
			return req.ID + " in version " + req.Version
		}
		b.CapabilityMatches = append(b.CapabilityMatches, protocol.CapabilityMatch{ID: req.ID, Required: req.Version, Offered: offered})
		if r, ok := in.Reliability[req.ID]; ok {
			b.ReliabilityEvidence = append(b.ReliabilityEvidence, r)
		}
	}
	return ""
}

// budgetsOf is a usage as budgets, every dimension present.
func budgetsOf(u protocol.Usage) protocol.Budgets {
	return protocol.Budgets{Money: &u.Money, Tokens: &u.Tokens, ToolCalls: &u.ToolCalls,
		ComputeSeconds: &u.ComputeSeconds, WallClockSeconds: &u.WallClockSeconds, SideEffects: &u.SideEffects}
}

// dimension reads one budget dimension, by its wire name
// (protocol.Budgets.Exceeded), of a usage and of budgets.
func dimension(name string, u protocol.Usage, b protocol.Budgets) (used, limit float64) {
	switch name {
	case "money":
		return u.Money, deref(b.Money)
	case "tokens":
		return float64(u.Tokens), float64(deref(b.Tokens))
	case "toolCalls":
		return float64(u.ToolCalls), float64(deref(b.ToolCalls))
	case "computeSeconds":
		return u.ComputeSeconds, deref(b.ComputeSeconds)
	case "wallClockSeconds":
		return u.WallClockSeconds, deref(b.WallClockSeconds)
	case "sideEffects":
		return float64(u.SideEffects), float64(deref(b.SideEffects))
	}
	return 0, 0
}

// UsageOf is budgets as a usage, an absent dimension 0.
func UsageOf(b protocol.Budgets) protocol.Usage {
	return protocol.Usage{Money: deref(b.Money), Tokens: deref(b.Tokens), ToolCalls: deref(b.ToolCalls),
		ComputeSeconds: deref(b.ComputeSeconds), WallClockSeconds: deref(b.WallClockSeconds), SideEffects: deref(b.SideEffects)}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Dependency is one of the offered item's prerequisites as projected.
type Dependency struct {
	WorkItemID string
	Policy     protocol.DependencyPolicy
	State      protocol.WorkItemState
}

// unsatisfiable reports a cancelled dependency (terminal, spec 10.2) whose
// policy needs it submitted or verified. A failed one may still be offered
// again, so it only waits.
func unsatisfiable(d Dependency) bool {
	return d.State == protocol.WorkCancelled && d.Policy != protocol.DependencyTerminal
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }
