package group

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// CheckContract reports a Work Contract that lacks required information
// (spec 10.1) as WORK_CONTRACT_INCOMPLETE, listing every missing member in
// details.missing. The schema validator catches the same on the wire; this
// guards typed values that reach the core by other paths.
func CheckContract(c *protocol.WorkContract) error {
	var missing []string
	need := func(ok bool, ptr string) {
		if !ok {
			missing = append(missing, ptr)
		}
	}
	need(c.ContractID != "", "/contractId")
	need(c.Revision >= 1, "/revision")
	need(c.Goal != "", "/goal")
	need(len(c.RequiredOutputs) > 0, "/requiredOutputs")
	for i, o := range c.RequiredOutputs {
		need(o.Name != "" && o.MediaType != "", "/requiredOutputs/"+strconv.Itoa(i))
	}
	need(len(c.AcceptanceCriteria) > 0, "/acceptanceCriteria")
	seen := map[string]bool{}
	for i, a := range c.AcceptanceCriteria {
		need(a.ID != "" && a.Description != "", "/acceptanceCriteria/"+strconv.Itoa(i))
		if seen[a.ID] {
			return protocol.InvalidCommand("acceptance criterion id %q is used twice", a.ID).At("/payload/contract/acceptanceCriteria/" + strconv.Itoa(i) + "/id")
		}
		seen[a.ID] = true
	}
	for i, d := range c.Dependencies {
		need(d.WorkItemID != "" && d.Policy.Known(), "/dependencies/"+strconv.Itoa(i))
	}
	need(len(c.RequiredCapabilities) > 0, "/requiredCapabilities")
	for i, k := range c.RequiredCapabilities {
		need(k.ID != "" && k.Version != "", "/requiredCapabilities/"+strconv.Itoa(i))
	}
	need(!c.Deadline.IsZero(), "/deadline")
	need(c.Urgency.Known(), "/urgency")
	need(c.BusinessImpact.Known(), "/businessImpact")
	b := c.Budgets
	need(b.Money != nil || b.Tokens != nil || b.ToolCalls != nil || b.ComputeSeconds != nil ||
		b.WallClockSeconds != nil || b.SideEffects != nil, "/budgets")
	need(c.RetryPolicy.MaxAttempts >= 1 && c.RetryPolicy.Backoff.Multiplier >= 1, "/retryPolicy")
	need(c.Risk.Class.Known(), "/risk/class")
	if len(missing) == 0 {
		return nil
	}
	e := protocol.Errorf(protocol.CodeWorkContractIncomplete, "work contract lacks %d required member(s), first %s", len(missing), missing[0]).At("/payload/contract" + missing[0])
	return protocol.WithDetails(e, "missing", missing)
}

// substantiallyDifferent reports whether two contracts differ in anything
// but revision and notes: prose never replaces a field, so a notes-only
// edit is not a revision (spec 10.1).
func substantiallyDifferent(a, b *protocol.WorkContract) bool {
	x, y := *a, *b
	x.Revision, y.Revision = 0, 0
	x.Notes, y.Notes = "", ""
	bx, errx := json.Marshal(x)
	by, erry := json.Marshal(y)
	return errx != nil || erry != nil || !bytes.Equal(bx, by)
}

// checkEvidenceCoverage requires Evidence for every acceptance criterion and
// no Evidence for criteria the contract does not have (spec 13.2).
func checkEvidenceCoverage(c *protocol.WorkContract, evidence []protocol.Evidence) error {
	known := map[string]bool{}
	for _, a := range c.AcceptanceCriteria {
		known[a.ID] = true
	}
	covered := map[string]bool{}
	var unknown []string
	for _, ev := range evidence {
		for _, id := range ev.Criteria {
			if !known[id] {
				unknown = append(unknown, id)
				continue
			}
			covered[id] = true
		}
	}
	var uncovered []string
	for _, a := range c.AcceptanceCriteria {
		if !covered[a.ID] {
			uncovered = append(uncovered, a.ID)
		}
	}
	if len(uncovered) == 0 && len(unknown) == 0 {
		return nil
	}
	e := protocol.InvalidCommand("evidence must map to every acceptance criterion: %d uncovered, %d unknown", len(uncovered), len(unknown)).At("/payload/evidence")
	return protocol.WithDetails(e, "uncoveredCriteria", nonNil(uncovered), "unknownCriteria", nonNil(unknown))
}

// hasFailureEvidence reports whether some Evidence is mapped to the failure
// criterion, as work.fail requires.
func hasFailureEvidence(evidence []protocol.Evidence) bool {
	for _, ev := range evidence {
		for _, id := range ev.Criteria {
			if id == protocol.CriterionFailure {
				return true
			}
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
