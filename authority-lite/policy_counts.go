package authoritylite

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// count is one counted limit a command would raise: the Group holds n,
// the policy allows max.
type count struct {
	policy, what string
	n, max       int
}

// countsFor counts, for the command, every limit it would raise by one.
func countsFor(c *call, gs *groupState) []count {
	n := &gs.counts
	switch pl := c.payload.(type) {
	case *protocol.AuthorizeWorkPayload:
		return []count{
			{policy: PolicyOpenWorkItems, what: "open WorkItems", n: n.open},
			{policy: PolicyDuplicateWork, what: "open WorkItems with this goal, capabilities and inputs", n: n.openByKey[decompositionKey(pl.Contract)]},
		}
	case *protocol.StartWorkPayload:
		return []count{{policy: PolicyActiveWorkItems, what: "active WorkItems", n: n.active}}
	case *protocol.AcceptOfferPayload:
		return []count{{policy: PolicyQueuedWorkItems, what: "queued WorkItems", n: n.queued}}
	case *protocol.BlockWorkPayload:
		if pl.Resolution.Kind != protocol.ResolutionClarification {
			return nil
		}
		return []count{{policy: PolicyClarifications, what: "unresolved clarification rounds", n: n.clarifying}}
	}
	return nil
}

func terminal(s protocol.WorkItemState) bool {
	return s == protocol.WorkVerified || s == protocol.WorkCancelled || s == protocol.WorkFailed
}

// decompositionKey is what makes two WorkItems the same work decomposed
// twice: the goal, the required capabilities and the input artifacts, in
// any order.
func decompositionKey(c protocol.WorkContract) string {
	caps := make([]string, 0, len(c.RequiredCapabilities))
	for _, rc := range c.RequiredCapabilities {
		caps = append(caps, rc.ID+"@"+rc.Version)
	}
	ins := make([]string, 0, len(c.Inputs))
	for _, in := range c.Inputs {
		ins = append(ins, in.Artifact)
	}
	slices.Sort(caps)
	slices.Sort(ins)
	return strings.Join([]string{strings.TrimSpace(c.Goal), strings.Join(caps, ","), strings.Join(ins, ",")}, "\x00")
}

// SoftLimitNotice is the text (JSON) of the message the authority posts in
// the Group's "policy" conversation when a command brings a counted limit
// to its soft threshold (spec 20: soft thresholds and coordinator
// notification before the hard refusal).
type SoftLimitNotice struct {
	Kind        string         `json:"kind"` // "policy.softLimit"
	Policy      string         `json:"policy"`
	Count       int            `json:"count"`
	SoftLimit   int            `json:"softLimit"`
	Limit       int            `json:"limit"`
	CommandType string         `json:"commandType"`
	ActionID    string         `json:"actionId"`
	Actor       protocol.Actor `json:"actor"`
}

// PolicyConversation is the conversation of the authority's policy notices;
// their text is a SoftLimitNotice in JSON (media type text/plain: a
// message carries only text).
const PolicyConversation = "policy"

// tellSoftLimit drafts the soft-threshold notice in the command's events.
func (s *Service) tellSoftLimit(c *call, gs *groupState, n *count, p *pending) {
	text, _ := json.Marshal(SoftLimitNotice{Kind: "policy.softLimit", Policy: n.policy, Count: n.n + 1, SoftLimit: s.cfg.Policy.soft(n.max),
		Limit: n.max, CommandType: string(c.cmd.Type), ActionID: c.cmd.ActionID, Actor: c.cmd.Actor})
	p.record(gs, s.messages(gs).Notice("policy-"+n.policy+"-"+c.cmd.ActionID, PolicyConversation, string(text))...)
}
