package runtime

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/scheduler"
)

// TestWireBasisIsValidOnTheWire puts a real decision's basis, converted,
// into a work.offer command and validates it with the protocol's schemas.
func TestWireBasisIsValidOnTheWire(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	s, err := scheduler.New(scheduler.Config{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroup("g1", scheduler.GroupConfig{Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(scheduler.Item{ID: "a", Group: "g1", Urgency: scheduler.UrgencyHigh, Estimate: 1500 * time.Millisecond, Capabilities: []string{"code.implement"}}, now); err != nil {
		t.Fatal(err)
	}
	d, ok := s.Next(now)
	if !ok {
		t.Fatal("no decision")
	}
	wire := WireBasis(d.Basis, []protocol.CapabilityMatch{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
		[]protocol.ReliabilityRecord{{CapabilityID: "code.implement", Attempts: 4, Successes: 4}}, now)
	if *wire.ExpectedCost.WallClockSeconds != 1.5 || !wire.AuthorizationEligible || len(wire.PolicyRulesApplied) == 0 {
		t.Fatalf("converted basis: %+v", wire)
	}
	payload, _ := json.Marshal(protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-1",
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: wire}}, ExpiresAt: protocol.NewTime(now)})
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	doc := p["candidates"].([]any)[0].(map[string]any)["selectionBasis"]
	raw, _ := json.Marshal(doc)
	parsed, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.ValidateDef("selectionBasis", parsed); err != nil {
		t.Fatalf("converted basis does not validate: %v", err)
	}
}
