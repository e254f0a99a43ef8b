package runtime

import (
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/slots"
)

// AdmissionInput is everything admission control (spec 10.3) looks at. It is
// plain data: Admit reads no clock and does no I/O.
type AdmissionInput struct {
	Now     time.Time
	AgentID string
	// Card is what this worker declared: its capabilities and slots.
	Capabilities []protocol.Capability
	Slots        int
	// Committed counts accepted, unfinished items (queued and running);
	// Capacity is the most the worker commits to at once.
	Committed int
	Capacity  int
	// Item is the offered WorkItem as projected; Contract its full contract.
	Item     queue.Entry
	Contract protocol.WorkContract
	// MissionActive is false once the Mission is terminal or archived.
	MissionActive bool
	// EarliestStart and Estimate are the scheduler's view: when a slot is
	// expected to take the item, and how long it runs.
	EarliestStart time.Time
	Estimate      time.Duration
	Confidence    float64
	// Reliability is this worker's track record per capability id.
	Reliability map[string]protocol.ReliabilityRecord
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
	RuleAdmitCapacity      = "admission.capacity.queue-depth"
	RuleAdmitDeadline      = "admission.deadline.estimated-completion"
	RuleAdmitDependency    = "admission.dependency.satisfiable"
	RuleAdmitBudget        = "admission.budget.wall-clock-covers-estimate"
)

// Admit decides whether to accept an offer. The checks run in the order of
// spec 10.3's list; the first failing one is the reason. Acceptance is a
// scheduling commitment, not an immediate start, so pending dependencies
// do not refuse an offer; a dependency that can no longer meet its policy
// does.
func Admit(in AdmissionInput) AdmissionDecision {
	b := protocol.SelectionBasis{
		CapabilityMatches:   protocol.List[protocol.CapabilityMatch]{},
		ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
		PolicyRulesApplied:  protocol.List[string]{},
		AvailabilityEstimate: protocol.AvailabilityEstimate{
			EarliestStart: protocol.NewTime(in.EarliestStart), Confidence: clamp01(in.Confidence),
		},
	}
	secs := in.Estimate.Seconds()
	b.ExpectedCost = protocol.Budgets{WallClockSeconds: &secs}
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
	case in.Renewal && in.Item.Owner != in.AgentID:
		return refuse(protocol.RejectAuthorization, "%s does not own the item", in.AgentID)
	case !in.Renewal && !in.Item.OfferedTo(in.AgentID):
		return refuse(protocol.RejectAuthorization, "the standing offer does not name %s", in.AgentID)
	case !in.Renewal && !in.Item.Offer.ExpiresAt.IsZero() && !in.Now.Before(in.Item.Offer.ExpiresAt.Time):
		return refuse(protocol.RejectAuthorization, "offer %s expired at %s", in.Item.Offer.OfferID, in.Item.Offer.ExpiresAt)
	case !in.MissionActive:
		return refuse(protocol.RejectAuthorization, "the Mission is not active")
	}
	b.AuthorizationEligible = true

	// Capability: every required capability in a satisfying version.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitCapability)
	if len(in.Contract.RequiredCapabilities) == 0 {
		return refuse(protocol.RejectCapability, "the contract names no required capability")
	}
	for _, req := range in.Contract.RequiredCapabilities {
		offered := ""
		for _, c := range in.Capabilities {
			if c.ID == req.ID && slots.VersionSatisfies(c.Version, req.Version) {
				offered = c.Version
				break
			}
		}
		if offered == "" {
			return refuse(protocol.RejectCapability, "no capability %s in version %s", req.ID, req.Version)
		}
		b.CapabilityMatches = append(b.CapabilityMatches, protocol.CapabilityMatch{ID: req.ID, Required: req.Version, Offered: offered})
		if r, ok := in.Reliability[req.ID]; ok {
			b.ReliabilityEvidence = append(b.ReliabilityEvidence, r)
		}
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
		if done := in.EarliestStart.Add(in.Estimate); done.After(dl) {
			return refuse(protocol.RejectDeadline, "estimated completion %s is after the deadline %s",
				done.UTC().Format(time.RFC3339), dl.UTC().Format(time.RFC3339))
		}
	}

	// Dependency: none may be in a state its policy can never accept.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitDependency)
	for _, d := range in.Item.Dependencies {
		if unsatisfiable(d) {
			return refuse(protocol.RejectDependency, "dependency %s is %s, its policy %s can no longer be met", d.WorkItemID, d.State, d.Policy)
		}
	}

	// Budget: the wall-clock budget must cover the estimate.
	b.PolicyRulesApplied = append(b.PolicyRulesApplied, RuleAdmitBudget)
	if w := in.Contract.Budgets.WallClockSeconds; w != nil && *w < secs {
		return refuse(protocol.RejectBudget, "wall-clock budget %.0fs is below the estimate %.0fs", *w, secs)
	}
	return AdmissionDecision{Basis: b}
}

// unsatisfiable reports a cancelled dependency (terminal, spec 10.2) whose
// policy needs it submitted or verified. A failed one may still be offered
// again, so it only waits.
func unsatisfiable(d queue.Dependency) bool {
	return d.State == protocol.WorkCancelled && d.Policy != protocol.DependencyTerminal
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }
