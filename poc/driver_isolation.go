package poc

import (
	"encoding/json"
	"fmt"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// checkCredentialScope reads every execution lease of the run from the
// authority's log and checks the credential each slot was given: the
// capability token is signed by the authority, names exactly the Group,
// WorkItem, agent and lease of the run it came with, expires no later than
// that lease, and no token serves two runs. Together with the slots
// package's isolation test (a slot's Work exposes only its own Mission's
// context, credentials and checkpoints) this is the report's evidence of
// credential isolation between Missions.
func checkCredentialScope(log EventLog, groups []string) InvariantResult {
	r := InvariantResult{Name: "credentials-scoped-per-lease"}
	keys := protocol.NewKeySet(log.PublicKey())
	seen := map[string]string{} // tokenId -> group/item
	n := 0
	var problems []string
	for _, g := range groups {
		evs, err := log.Events(g, 0, 0)
		if err != nil {
			r.Detail = err.Error()
			return r
		}
		for _, se := range evs {
			if se.Type != protocol.EvtWorkStarted && se.Type != protocol.EvtWorkProgressed {
				continue
			}
			var ev protocol.Event
			if json.Unmarshal(se.Raw, &ev) != nil {
				continue
			}
			payload, err := group.Decode(ev.Type, ev.Payload)
			lease := group.LeaseOf(payload)
			if err != nil || lease == nil {
				continue
			}
			tok := group.CapabilityTokenOf(payload)
			where := g + "/" + se.WorkItemID
			if tok == nil {
				problems = append(problems, fmt.Sprintf("%s: lease %s came without a capability token", where, lease.LeaseID))
				continue
			}
			n++
			switch {
			case protocol.CheckCapabilityToken(tok, keys, lease.LeaseID, tok.IssuedAt.Time) != nil:
				problems = append(problems, fmt.Sprintf("%s: token %s does not verify for lease %s", where, tok.TokenID, lease.LeaseID))
			case tok.GroupID != g || tok.WorkItemID != se.WorkItemID || tok.AgentID != lease.AgentID:
				problems = append(problems, fmt.Sprintf("%s: token %s names %s/%s for %s", where, tok.TokenID, tok.GroupID, tok.WorkItemID, tok.AgentID))
			case tok.ExpiresAt.After(lease.ExpiresAt.Time):
				problems = append(problems, fmt.Sprintf("%s: token %s outlives its lease", where, tok.TokenID))
			}
			if other, dup := seen[tok.TokenID]; dup && other != where {
				problems = append(problems, fmt.Sprintf("token %s serves both %s and %s", tok.TokenID, other, where))
			}
			seen[tok.TokenID] = where
		}
	}
	r.Held = len(problems) == 0 && n > 0
	switch {
	case len(problems) > 0:
		r.Detail = problems[0]
		if len(problems) > 1 {
			r.Detail += fmt.Sprintf(" (and %d more)", len(problems)-1)
		}
	case n == 0:
		r.Detail = "no execution lease in the log"
	default:
		r.Detail = fmt.Sprintf("%d capability tokens, each signed, bound to one Group, WorkItem, agent and lease, none outliving it", n)
	}
	return r
}
