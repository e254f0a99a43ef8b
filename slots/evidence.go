package slots

import (
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// EvidenceCheck is what a handler found for one kind of evidence: a name
// a criterion lists in its evidenceRequired ("unit tests", "review").
type EvidenceCheck struct {
	Result    protocol.EvidenceResult // pass, fail or inconclusive
	Method    string                  // how it was checked
	Artifacts []string                // digests of what shows it
	Detail    string                  // optional, added to the method
}

// EvidenceFor is one Evidence per acceptance criterion of c, about
// subject, produced by producer at now; the Go twin of mwpslot's
// evidence_for. checks maps an evidence kind to what was found: a
// criterion passes when every kind it requires was checked and passed,
// takes the first non-passing result otherwise, and is inconclusive when a
// kind was not checked. Its method lists each kind's, its artifacts are
// the union of theirs, sorted.
func EvidenceFor(c protocol.WorkContract, subject string, producer protocol.Actor, checks map[string]EvidenceCheck, now time.Time) []protocol.Evidence {
	var out []protocol.Evidence
	for _, ac := range c.AcceptanceCriteria {
		result := protocol.EvidencePass
		var methods, arts []string
		for _, kind := range ac.EvidenceRequired {
			ch, ok := checks[kind]
			if !ok {
				result = protocol.EvidenceInconclusive
				methods = append(methods, kind+": not checked")
				continue
			}
			if ch.Result != protocol.EvidencePass && result == protocol.EvidencePass {
				result = ch.Result
			}
			m := kind + ": " + ch.Method
			if ch.Detail != "" {
				m += " (" + ch.Detail + ")"
			}
			methods = append(methods, m)
			arts = append(arts, ch.Artifacts...)
		}
		slices.Sort(arts)
		method := strings.Join(methods, "; ")
		if method == "" {
			method = "none"
		}
		out = append(out, protocol.Evidence{Subject: subject, Criteria: protocol.List[string]{ac.ID}, Method: method, Result: result,
			Producer: producer, Timestamp: protocol.NewTime(now), Artifacts: protocol.List[string](slices.Compact(arts))})
	}
	return out
}

// Evidence is EvidenceFor this run's contract, about its WorkItem, by the
// worker's agent, now.
func (w *Work) Evidence(checks map[string]EvidenceCheck) []protocol.Evidence {
	return EvidenceFor(w.Contract(), w.r.slot.WorkItemID, w.Agent(), checks, w.r.pool.cfg.Clock.Now())
}
