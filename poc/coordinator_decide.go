package poc

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// actionKind is what the coordinator does next.
type actionKind string

const (
	actRenew     actionKind = "renew"
	actMember    actionKind = "member"
	actAuthorize actionKind = "authorize"
	actPublish   actionKind = "publish-input"
	actReview    actionKind = "review"
	actOffer     actionKind = "offer"
	actApproval  actionKind = "submit-for-approval"
)

// action is one decision; the edge turns it into a signed Command.
type action struct {
	kind   actionKind
	item   string // WorkItem, or the agent for actMember
	stage  Stage
	digest string // actPublish: the input artifact
}

func (a action) key() string { return string(a.kind) + ":" + a.item + a.digest }

// WorkerInfo is a candidate worker as its Agent Card describes it.
type WorkerInfo struct {
	AgentID      string
	Capabilities []protocol.Capability
}

// decideConfig holds the coordinator's policy knobs.
type decideConfig struct {
	me          string
	renewBefore time.Duration
	inputs      map[string][]byte // coordinator-made inputs by digest (feature and change requests)
}

// stages is the Mission graph plus the rework stages of every change
// request the view has seen; rework inputs depend on the log, so they are
// derived here rather than stored.
func stages(m MissionSpec, v *view) []Stage {
	out := m.WorkStages()
	for round := range v.changeRequests {
		base := latestPatch(m, v, round)
		if base == "" {
			break // the previous round's patch is not verified yet
		}
		out = append(out, ReworkStages(m, round+1, protocol.Digest(changeRequestBytes(v.changeRequests[round])), base)...)
	}
	return out
}

// latestPatch is the verified patch of the implementation stage of round
// (0 = the original graph), or "" when it is not verified.
func latestPatch(m MissionSpec, v *view, round int) string {
	for _, s := range m.WorkStages() {
		if s.Kind != StageImplementation {
			continue
		}
		id := s.WorkItemID
		if round > 0 {
			id = fmt.Sprintf("%s-r%d", id, round)
		}
		w := v.items[id]
		if w == nil || w.accepted == nil {
			return ""
		}
		for _, a := range w.accepted.artifacts {
			if v.manifests[a].MediaType == MediaDiff {
				return a
			}
		}
	}
	return ""
}

func changeRequestBytes(cr ChangeRequest) []byte {
	raw, err := protocol.Marshal(cr)
	if err != nil {
		panic(err) // strings only
	}
	return raw
}

// decide returns the coordinator's next actions in priority order. It is
// pure: the view, the graph, the candidate workers and the time.
func decide(v *view, m MissionSpec, workers []WorkerInfo, now time.Time, cfg decideConfig) []action {
	if v.missionState != protocol.MissionActive || v.coordAgent != cfg.me {
		return nil
	}
	var acts []action
	if !v.coordExpires.IsZero() && v.coordExpires.Sub(now) < cfg.renewBefore {
		acts = append(acts, action{kind: actRenew})
	}
	for _, w := range workers {
		if !v.members[w.AgentID] {
			acts = append(acts, action{kind: actMember, item: w.AgentID})
		}
	}
	all := stages(m, v)
	for _, s := range all {
		if v.items[s.WorkItemID] == nil {
			acts = append(acts, action{kind: actAuthorize, item: s.WorkItemID, stage: s})
			break // in graph order: dependencies exist before their dependents
		}
	}
	for _, s := range all {
		w := v.items[s.WorkItemID]
		if w == nil {
			continue
		}
		for _, in := range w.contract.Inputs {
			if _, mine := cfg.inputs[in.Artifact]; mine {
				if _, ok := v.manifests[in.Artifact]; !ok {
					acts = append(acts, action{kind: actPublish, item: s.WorkItemID, digest: in.Artifact})
				}
			}
		}
	}
	for _, s := range all {
		if w := v.items[s.WorkItemID]; w != nil && w.state == protocol.WorkSubmitted && w.submission != nil && !w.submission.reviewed {
			acts = append(acts, action{kind: actReview, item: s.WorkItemID, stage: s})
		}
	}
	for _, s := range all {
		w := v.items[s.WorkItemID]
		if w != nil && needsOffer(w, now) && depsVerified(v, w.contract) && len(candidates(v, w, workers, now)) > 0 {
			acts = append(acts, action{kind: actOffer, item: s.WorkItemID, stage: s})
		}
	}
	if len(all) > 0 && len(all) == verifiedCount(v, all) && v.changeRoundsDone(m) {
		acts = append(acts, action{kind: actApproval})
	}
	return acts
}

// changeRoundsDone reports whether every change request has its rework
// stages in the graph (their base patch was verified).
func (v *view) changeRoundsDone(m MissionSpec) bool {
	return len(v.changeRequests) == 0 || latestPatch(m, v, len(v.changeRequests)-1) != ""
}

func verifiedCount(v *view, all []Stage) int {
	n := 0
	for _, s := range all {
		if w := v.items[s.WorkItemID]; w != nil && (w.state == protocol.WorkVerified || w.state == protocol.WorkCancelled) {
			n++
		}
	}
	return n
}

// needsOffer: open; failed with attempts left; an offer that expired; an
// owner that lapsed (its expired grant is fenced by the next offer).
func needsOffer(w *itemView, now time.Time) bool {
	switch w.state {
	case protocol.WorkOpen:
		return true
	case protocol.WorkFailed:
		return uint64(w.failures) < max(w.contract.RetryPolicy.MaxAttempts, 1)
	case protocol.WorkOffered:
		return !now.Before(w.offerExpires)
	}
	return w.ownerLapsed(now)
}

func depsVerified(v *view, c protocol.WorkContract) bool {
	for _, d := range c.Dependencies {
		w := v.items[d.WorkItemID]
		if w == nil || w.state != protocol.WorkVerified {
			return false
		}
	}
	return true
}

// candidates are the member workers whose capabilities satisfy the
// contract, best track record first; an owner that lapsed on this item
// is left out while another candidate exists.
func candidates(v *view, w *itemView, workers []WorkerInfo, now time.Time) []WorkerInfo {
	var ok []WorkerInfo
	for _, wk := range workers {
		if v.members[wk.AgentID] && capabilityMatch(wk, w.contract) != nil {
			ok = append(ok, wk)
		}
	}
	if lapsed := w.lapsedOwners(now); len(lapsed) > 0 {
		var fresh []WorkerInfo
		for _, wk := range ok {
			if !slices.Contains(lapsed, wk.AgentID) {
				fresh = append(fresh, wk)
			}
		}
		if len(fresh) > 0 {
			ok = fresh
		}
	}
	sort.SliceStable(ok, func(i, j int) bool {
		ri, rj := v.rel(ok[i].AgentID, w.contract), v.rel(ok[j].AgentID, w.contract)
		if ri.Successes != rj.Successes {
			return ri.Successes > rj.Successes
		}
		return ok[i].AgentID < ok[j].AgentID
	})
	return ok
}

// capabilityMatch returns the match of every required capability, or nil
// when one is missing.
func capabilityMatch(wk WorkerInfo, c protocol.WorkContract) []protocol.CapabilityMatch {
	var out []protocol.CapabilityMatch
	for _, req := range c.RequiredCapabilities {
		found := false
		for _, have := range wk.Capabilities {
			if have.ID == req.ID && slots.VersionSatisfies(have.Version, req.Version) {
				out = append(out, protocol.CapabilityMatch{ID: req.ID, Required: req.Version, Offered: have.Version})
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return out
}

// lapsedOwners are the agents whose ownership of w lapsed: fenced by an
// earlier offer, or lapsing now (the offer about to be made fences it).
func (w *itemView) lapsedOwners(now time.Time) []string {
	out := slices.Clone(w.fenced)
	if w.ownerLapsed(now) && !slices.Contains(out, w.owner) {
		out = append(out, w.owner)
	}
	return out
}

// offerContract is the contract to offer: the graph's, with the outputs
// of the verified dependencies added as inputs under their output names
// (a substantial change, so the revision goes up by one).
func offerContract(v *view, w *itemView, s Stage) protocol.WorkContract {
	c := w.contract
	inputs := append(protocol.List[protocol.InputRef]{}, s.Contract.Inputs...)
	for _, d := range c.Dependencies {
		dep := v.items[d.WorkItemID]
		if dep == nil || dep.accepted == nil {
			continue
		}
		for _, a := range dep.accepted.artifacts {
			if name := outputName(dep.contract, v.manifests[a].MediaType); name != "" {
				inputs = append(inputs, protocol.InputRef{Artifact: a, Name: name})
			}
		}
	}
	if !slices.Equal(inputs, c.Inputs) {
		c.Inputs = inputs
		c.Revision++
	}
	return c
}

func outputName(c protocol.WorkContract, mediaType string) string {
	for _, o := range c.RequiredOutputs {
		if o.MediaType == mediaType {
			return o.Name
		}
	}
	return ""
}

// offerPayload builds the work.offer for w with a structured selection
// basis per candidate (spec 10.3).
func offerPayload(v *view, w *itemView, s Stage, workers []WorkerInfo, now time.Time, ttl time.Duration, maxCandidates int) *protocol.OfferWorkPayload {
	cs := candidates(v, w, workers, now)
	if len(cs) > maxCandidates {
		cs = cs[:maxCandidates]
	}
	rules := protocol.List[string]{"capability-version-match", "active-membership", fmt.Sprintf("max-candidates:%d", maxCandidates), "reliability-then-id-order"}
	if len(w.lapsedOwners(now)) > 0 {
		rules = append(rules, "exclude-lapsed-owner")
	}
	calls := uint64(0)
	if s.Kind == StageTesting || s.Kind == StageIntegration {
		calls = 1
	}
	out := make(protocol.List[protocol.OfferCandidate], len(cs))
	for i, wk := range cs {
		r := *v.rel(wk.AgentID, w.contract)
		out[i] = protocol.OfferCandidate{AgentID: wk.AgentID, SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     capabilityMatch(wk, w.contract),
			AuthorizationEligible: v.members[wk.AgentID],
			AvailabilityEstimate:  protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost:          protocol.Budgets{ToolCalls: protocol.Uint64(calls), WallClockSeconds: protocol.Float64(30)},
			ReliabilityEvidence:   protocol.List[protocol.ReliabilityRecord]{r},
			PolicyRulesApplied:    rules,
		}}
	}
	return &protocol.OfferWorkPayload{WorkItemID: w.id, OfferID: fmt.Sprintf("off-%s-%d", w.id, w.offers+1),
		Contract: offerContract(v, w, s), Candidates: out, ExpiresAt: protocol.NewTime(now.Add(ttl))}
}

// approvalPayload gathers, for the human, every verified stage's review
// evidence and final artifacts (spec 13.2: all results are kept for the
// final human approval).
func approvalPayload(v *view, m MissionSpec) *protocol.SubmitForApprovalPayload {
	p := &protocol.SubmitForApprovalPayload{MissionID: m.MissionID, Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{}}
	summary := m.Title + ":"
	for _, s := range stages(m, v) {
		w := v.items[s.WorkItemID]
		if w == nil || w.accepted == nil {
			continue
		}
		summary += " " + s.Name + " verified;"
		p.Artifacts = append(p.Artifacts, w.accepted.artifacts...)
		p.Evidence = append(p.Evidence, w.accepted.evidence...)
	}
	if len(v.changeRequests) > 0 {
		summary += fmt.Sprintf(" %d change request(s) answered;", len(v.changeRequests))
	}
	p.Summary = summary[:len(summary)-1]
	return p
}
