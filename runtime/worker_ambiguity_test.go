package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// clarifyingHandler raises a question about every contract whose goal
// does not name a branch (slots.Clarifier).
type clarifyingHandler struct{ *stepHandler }

func (h clarifyingHandler) Clarify(c protocol.WorkContract) []string {
	if strings.Contains(c.Goal, "branch") {
		return nil
	}
	return []string{"which branch should the change go to?"}
}

// An essential ambiguity (spec 10.1) is raised in the WorkItem's
// conversation before acceptance and the item is not queued; the
// coordinator's corrected contract in a new offer is judged afresh and
// accepted.
func TestWorkerRaisesAmbiguityBeforeAccepting(t *testing.T) {
	k := newWKit(t)
	h := clarifyingHandler{newStepHandler(1)}
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("ambiguity posted", func() bool {
		for _, ev := range k.events() {
			if ev.Type == protocol.EvtMessagePosted && strings.Contains(string(ev.Payload), "contract.ambiguity") {
				return true
			}
		}
		return false
	}, tw)
	k.caughtUp(tw)
	var notice string
	for _, ev := range k.events() {
		if ev.Type == protocol.EvtWorkOfferAccepted {
			t.Fatalf("an ambiguous contract was accepted: %s", ev.Payload)
		}
		if ev.Type == protocol.EvtMessagePosted && strings.Contains(string(ev.Payload), "contract.ambiguity") {
			notice = string(ev.Payload)
		}
	}
	if k.state("wi-1") != protocol.WorkOffered || !strings.Contains(notice, "which branch should the change go to?") ||
		!strings.Contains(notice, `\"workItemId\":\"wi-1\"`) || !strings.Contains(notice, `\"offerId\":\"off-wi-1\"`) {
		t.Fatalf("wi-1 %s; notice %s", k.state("wi-1"), notice)
	}

	// The coordinator answers with a corrected contract in a new offer.
	w := k.item("wi-1")
	c := w.Contract
	c.Goal += " on branch main"
	c.Revision++
	now := k.ac.Now()
	k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-wi-1-2", Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"capability-match"}}}},
		ExpiresAt: protocol.NewTime(now.Add(time.Hour))})
	k.waitFor("wi-1 running on the corrected contract", runningAll("wi-1"), tw)
	if got := k.item("wi-1").Contract.Revision; got != c.Revision {
		t.Fatalf("running on revision %d, want %d", got, c.Revision)
	}
}
