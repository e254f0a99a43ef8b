package protocol

import "testing"

func TestValidateDef(t *testing.T) {
	good := map[string]any{"capabilityMatches": []any{map[string]any{"id": "x", "required": "1.x", "offered": "1.0.0"}},
		"authorizationEligible": true, "availabilityEstimate": map[string]any{"earliestStart": "2026-11-30T08:00:00Z", "confidence": 1},
		"expectedCost": map[string]any{"tokens": 1}, "reliabilityEvidence": []any{}, "policyRulesApplied": []any{}}
	if err := ValidateDef("selectionBasis", good); err != nil {
		t.Fatalf("valid basis: %v", err)
	}
	bad := map[string]any{}
	for k, v := range good {
		bad[k] = v
	}
	bad["capabilityMatches"] = []any{}
	if err := ValidateDef("selectionBasis", bad); CodeOf(err) != CodeSchemaValidationFailed {
		t.Fatalf("empty capabilityMatches: %v", err)
	}
	if err := ValidateDef("noSuchDefinition", good); err == nil {
		t.Fatal("unknown definition accepted")
	}
	if err := ValidateDef("../command", good); err == nil {
		t.Fatal("path in a definition name accepted")
	}
}
