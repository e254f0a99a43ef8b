package runtime

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/scheduler"
)

// WireBasis converts the scheduler's selection basis into the docs/wire.md
// shape (spec 10.3) recorded with an offer acceptance or a start; it lives
// here because the scheduler stays free of the protocol's schema code. The
// caller
// adds what the scheduler does not know: how each required capability was
// matched and the track record of the capabilities used. Expected cost is
// the scheduler's slot-time estimate, in wall-clock and compute seconds;
// the availability estimate is the time the basis names, with full
// confidence when the slot is free now and less for a later start.
func WireBasis(b scheduler.SelectionBasis, matches []protocol.CapabilityMatch, reliability []protocol.ReliabilityRecord, now time.Time) protocol.SelectionBasis {
	secs := float64(b.ExpectedCost) / 1000
	conf := 1.0
	if b.AvailabilityEstimate.After(now) {
		conf = 0.5
	}
	out := protocol.SelectionBasis{
		CapabilityMatches:     append(protocol.List[protocol.CapabilityMatch]{}, matches...),
		AuthorizationEligible: b.AuthorizationEligible,
		AvailabilityEstimate:  protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(b.AvailabilityEstimate), Confidence: conf},
		ExpectedCost:          protocol.Budgets{WallClockSeconds: &secs, ComputeSeconds: &secs},
		ReliabilityEvidence:   append(protocol.List[protocol.ReliabilityRecord]{}, reliability...),
		PolicyRulesApplied:    append(protocol.List[string]{}, b.PolicyRulesApplied.Names()...),
	}
	return out
}
