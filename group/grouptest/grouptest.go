// Package grouptest holds fixtures for tests of the Group state machine and
// of the services built on it: a complete Work Contract and passing
// evidence, so every test starts from the same valid shapes.
package grouptest

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// T0 is an arbitrary fixed origin; tests only ever compare times relative
// to it.
var T0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// Contract is a complete Work Contract for WorkItem id with two acceptance
// criteria (ac-1 needs a test report, ac-2 a lint report), due a day after
// T0.
func Contract(id string, deps ...protocol.Dependency) protocol.WorkContract {
	return protocol.WorkContract{
		ContractID: "wc-" + id, Revision: 1, Goal: "implement " + id,
		RequiredOutputs: protocol.List[protocol.OutputSpec]{{Name: "patch", MediaType: "text/x-diff"}},
		AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
			{ID: "ac-1", Description: "tests pass", EvidenceRequired: protocol.List[string]{"test-report"}},
			{ID: "ac-2", Description: "lint clean", EvidenceRequired: protocol.List[string]{"lint-report"}},
		},
		Inputs: protocol.List[protocol.InputRef]{}, Dependencies: protocol.List[protocol.Dependency](deps),
		AllowedTools: protocol.List[string]{"git"}, AllowedData: protocol.List[string]{"repo:a"},
		AllowedOperations:    protocol.List[string]{"read", "write"},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.x"}},
		Deadline:             protocol.NewTime(T0.Add(24 * time.Hour)), Urgency: protocol.UrgencyNormal,
		BusinessImpact: protocol.ImpactMedium, Budgets: protocol.Budgets{Tokens: protocol.Uint64(1000)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2}},
		Risk:        protocol.Risk{Class: protocol.RiskLow},
	}
}

// Evidence is a passing deterministic-test result for criteria of subject,
// produced by agent w1 at T0.
func Evidence(subject string, criteria ...string) protocol.Evidence {
	return protocol.Evidence{
		Subject: subject, Criteria: protocol.List[string](criteria), Method: "deterministic-test",
		Result: protocol.EvidencePass, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"},
		Timestamp: protocol.NewTime(T0), Artifacts: protocol.List[string]{},
	}
}
