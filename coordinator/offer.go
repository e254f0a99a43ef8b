package coordinator

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// The rules an offer's selection basis names (policyRulesApplied).
const (
	ruleCapability  = "capability-version-match"
	ruleMembership  = "active-membership"
	ruleRank        = "reliability-then-availability-then-id"
	ruleSequential  = "exclusive-sequential"
	ruleUrgent      = "urgent-candidate-set"
	ruleSkipOffered = "skip-offered-this-round"
	ruleSkipLapsed  = "exclude-lapsed-owner"
)

// candidates are the eligible workers for w, best first: active members
// holding the worker role (group.CheckCandidate, the rule the authority
// refuses an offer by) whose Agent Card satisfies every required
// capability. Agents already
// offered w this round, and owners whose ownership of it lapsed, are
// left out while another eligible worker remains.
func candidates(v *view, w *group.WorkItem, workers []Worker, now time.Time) []Worker {
	var ok []Worker
	for _, wk := range workers {
		if v.mayWork(wk.AgentID) && capabilityMatch(wk, w.Contract) != nil {
			ok = append(ok, wk)
		}
	}
	l := v.item(w.WorkItemID)
	for _, skip := range [][]string{lapsedOwners(l, w, now), l.offered} {
		if fresh := without(ok, skip); len(fresh) > 0 {
			ok = fresh
		}
	}
	slices.SortStableFunc(ok, func(a, b Worker) int {
		ra, rb := v.agent(a.AgentID), v.agent(b.AgentID)
		return cmp.Or(cmp.Compare(score(rb), score(ra)),
			availability(v, a.AgentID, now).Compare(availability(v, b.AgentID, now)),
			cmp.Compare(a.AgentID, b.AgentID))
	})
	return ok
}

// score is an agent's reliability in this log: results accepted minus
// failures and lapsed ownerships.
func score(a *agentLog) int64 { return int64(a.accepted) - int64(a.failed) - int64(a.lapsed) }

// availability is when an agent said it could start: the start of the
// window it last disclosed, or now when it disclosed none or it passed.
func availability(v *view, agentID string, now time.Time) time.Time {
	if d := v.agent(agentID).disclosure; d != nil && d.EstimatedStartWindow.From.After(now) {
		return d.EstimatedStartWindow.From.Time
	}
	return now
}

func without(ws []Worker, skip []string) []Worker {
	var out []Worker
	for _, w := range ws {
		if !slices.Contains(skip, w.AgentID) {
			out = append(out, w)
		}
	}
	return out
}

// lapsedOwners are the agents whose ownership of w lapsed: fenced by an
// earlier offer, or lapsing now (the offer about to be made fences it).
func lapsedOwners(l *itemLog, w *group.WorkItem, now time.Time) []string {
	out := slices.Clone(l.fenced)
	if lapsed(w, now) && !slices.Contains(out, w.Ownership.OwnerAgentID) {
		out = append(out, w.Ownership.OwnerAgentID)
	}
	return out
}

// capabilityMatch returns the match of every required capability, or nil
// when the worker lacks one.
func capabilityMatch(wk Worker, c protocol.WorkContract) []protocol.CapabilityMatch {
	var out []protocol.CapabilityMatch
	for _, req := range c.RequiredCapabilities {
		i := slices.IndexFunc(wk.Capabilities, func(have protocol.Capability) bool {
			return have.ID == req.ID && protocol.VersionSatisfies(have.Version, req.Version)
		})
		if i < 0 {
			return nil
		}
		out = append(out, protocol.CapabilityMatch{ID: req.ID, Required: req.Version, Offered: wk.Capabilities[i].Version})
	}
	return out
}

// urgent reports whether an item goes to a candidate set rather than to
// one worker at a time.
func urgent(c protocol.WorkContract) bool {
	return c.Urgency == protocol.UrgencyHigh || c.Urgency == protocol.UrgencyCritical
}

// offerPayload builds the work.offer for w: one candidate, or up to
// maxCandidates for an urgent item, each with its selection basis (spec
// 10.3, docs/wire.md).
func offerPayload(v *view, p *plan.Plan, w *group.WorkItem, workers []Worker, now time.Time, pol policy) *protocol.OfferWorkPayload {
	cs := candidates(v, w, workers, now)
	rules := protocol.List[string]{ruleCapability, ruleMembership, ruleRank}
	n := 1
	if urgent(w.Contract) {
		n = max(pol.maxCandidates, 1)
		rules = append(rules, fmt.Sprintf("%s:%d", ruleUrgent, n))
	} else {
		rules = append(rules, ruleSequential)
	}
	if l := v.item(w.WorkItemID); len(l.offered) > 0 {
		rules = append(rules, ruleSkipOffered)
	}
	if len(lapsedOwners(v.item(w.WorkItemID), w, now)) > 0 {
		rules = append(rules, ruleSkipLapsed)
	}
	cs = cs[:min(n, len(cs))]
	out := make(protocol.List[protocol.OfferCandidate], len(cs))
	for i, wk := range cs {
		a := v.agent(wk.AgentID)
		est := protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(availability(v, wk.AgentID, now)), Confidence: 0.5}
		if a.disclosure != nil {
			est.Confidence = a.disclosure.Confidence
		}
		capID := ""
		if len(w.Contract.RequiredCapabilities) > 0 {
			capID = w.Contract.RequiredCapabilities[0].ID
		}
		out[i] = protocol.OfferCandidate{AgentID: wk.AgentID, SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     capabilityMatch(wk, w.Contract),
			AuthorizationEligible: true,
			AvailabilityEstimate:  est,
			ExpectedCost:          w.Contract.Budgets,
			ReliabilityEvidence:   protocol.List[protocol.ReliabilityRecord]{{CapabilityID: capID, Attempts: a.accepted + a.failed + a.lapsed, Successes: a.accepted}},
			PolicyRulesApplied:    rules,
		}}
	}
	return &protocol.OfferWorkPayload{WorkItemID: w.WorkItemID, OfferID: fmt.Sprintf("off-%s-%d", w.WorkItemID, v.item(w.WorkItemID).offers+1),
		Contract: offerContract(v, p, w), Candidates: out, ExpiresAt: protocol.NewTime(now.Add(pol.offerTTL))}
}

// offerContract is the contract to offer: the current one with the plan's
// inputs and the outputs of every dependency that meets its policy, named
// by the output they are (a substantial change: the revision goes up).
func offerContract(v *view, p *plan.Plan, w *group.WorkItem) protocol.WorkContract {
	c := w.Contract
	var inputs protocol.List[protocol.InputRef]
	if s := stageOf(p, w.WorkItemID); s != nil {
		inputs = append(inputs, s.Inputs...)
	}
	for _, d := range c.Dependencies {
		dep, l := v.g.Items[d.WorkItemID], v.items[d.WorkItemID]
		if dep == nil || l == nil {
			continue
		}
		sub := l.accepted
		if sub == nil && dep.State == protocol.WorkSubmitted {
			sub = l.submission
		}
		if sub == nil {
			continue
		}
		for _, a := range sub.artifacts {
			inputs = append(inputs, protocol.InputRef{Artifact: a, Name: inputName(dep.Contract, v.manifests[[2]string{d.WorkItemID, a}].MediaType, d.WorkItemID)})
		}
	}
	if !slices.Equal(inputs, c.Inputs) && !(len(inputs) == 0 && len(c.Inputs) == 0) {
		c.Inputs = inputs
		c.Revision++
	}
	return c
}

// inputName names a dependency's artifact by the required output it
// fills, else by the dependency.
func inputName(c protocol.WorkContract, mediaType, dep string) string {
	for _, o := range c.RequiredOutputs {
		if o.MediaType == mediaType {
			return o.Name
		}
	}
	return dep
}

func stageOf(p *plan.Plan, workItemID string) *plan.Stage {
	for i := range p.Stages {
		if p.Stages[i].WorkItemID == workItemID {
			return &p.Stages[i]
		}
	}
	return nil
}
