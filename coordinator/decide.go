package coordinator

import (
	"fmt"
	"math"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
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
	actTerminate actionKind = "terminate"
	actContext   actionKind = "context"
)

// action is one decision; the runner turns it into a signed command.
type action struct {
	kind   actionKind
	item   string // the WorkItem, or the agent of actMember
	stage  *plan.Stage
	reason string // actTerminate
	digest string // actPublish: the input
	// rebuild counts the commands of this action refused with
	// ACTION_ID_COLLISION at this log position: each is built again under
	// a new action id (spec 19).
	rebuild int
}

func (a action) key() string { return string(a.kind) + ":" + a.item + a.digest }

// Worker is a candidate worker as its Agent Card describes it.
type Worker struct {
	AgentID      string
	Capabilities []protocol.Capability
}

// policy holds the decision's knobs (Config with defaults applied).
type policy struct {
	me            string
	leaseDuration time.Duration
	offerTTL      time.Duration
	maxCandidates int
	// prechecked maps a WorkItem to the submission whose integrity and
	// checks passed while its reviewer's verdict is still to come.
	prechecked map[string]uint64
	inputs     map[string]Input // Config.Inputs by digest
	rework     Rework
}

// decide returns the coordinator's next actions in priority order. It is
// pure: the view, the plan, the candidate workers and the time.
func decide(v *view, base *plan.Plan, workers []Worker, now time.Time, pol policy) []action {
	c := v.coordinator()
	if v.missionState() != protocol.MissionActive || c == nil || c.AgentID != pol.me {
		return nil
	}
	p, complete := effective(v, base, pol.rework)
	var acts []action
	if c.LeaseExpiresAt.Sub(now) < pol.leaseDuration/2 {
		acts = append(acts, action{kind: actRenew})
	}
	for _, w := range workers {
		if !v.isMember(w.AgentID) {
			acts = append(acts, action{kind: actMember, item: w.AgentID})
		}
	}
	// Every stage is authorized up front, in plan order (a dependency
	// exists before its dependents): work.start refuses an item whose
	// dependencies are unmet, and offers wait for them below.
	for i := range p.Stages {
		if s := &p.Stages[i]; v.g.Items[s.WorkItemID] == nil {
			acts = append(acts, action{kind: actAuthorize, item: s.WorkItemID, stage: s})
			break
		}
	}
	for i := range p.Stages {
		s := &p.Stages[i]
		if v.g.Items[s.WorkItemID] == nil {
			continue
		}
		for _, in := range s.Inputs {
			if _, mine := pol.input(v, in.Artifact); mine && !v.published[in.Artifact] {
				acts = append(acts, action{kind: actPublish, item: s.WorkItemID, stage: s, digest: in.Artifact})
			}
		}
	}
	for i := range p.Stages {
		s := &p.Stages[i]
		w, l := v.g.Items[s.WorkItemID], v.items[s.WorkItemID]
		if w == nil || w.State != protocol.WorkSubmitted || l == nil || l.submission == nil || l.submission.reviewed {
			continue
		}
		if st := semanticState(v, p, s); st.waiting && pol.prechecked[s.WorkItemID] == l.submission.seq {
			continue // its integrity and checks passed; the reviewer's verdict is awaited
		}
		acts = append(acts, action{kind: actReview, item: s.WorkItemID, stage: s})
	}
	for i := range p.Stages {
		s := &p.Stages[i]
		w := v.g.Items[s.WorkItemID]
		if w == nil {
			continue
		}
		if w.State == protocol.WorkFailed && !attemptsLeft(v, w) {
			reason := fmt.Sprintf("stage %s failed %d time(s), its retry policy allows %d", s.ID, v.item(w.WorkItemID).failures, maxAttempts(w))
			return append(acts, action{kind: actTerminate, item: w.WorkItemID, stage: s, reason: reason})
		}
		if needsOffer(v, w, now) && len(v.g.DependenciesMet(w.WorkItemID)) == 0 && inputsReady(v, s, pol) && len(candidates(v, w, workers, now)) > 0 {
			// The item's Context Package first, when what it says changed
			// (spec 13.3); a refused one does not hold the offer back.
			if contextDue(v, p, w) {
				acts = append(acts, action{kind: actContext, item: s.WorkItemID, stage: s})
			}
			acts = append(acts, action{kind: actOffer, item: s.WorkItemID, stage: s})
		}
	}
	if complete && allVerified(v, p) {
		acts = append(acts, action{kind: actApproval})
	}
	return acts
}

// starved reports whether an item is due an offer that no worker, as
// their cards last read describe them, is eligible for.
func starved(v *view, base *plan.Plan, workers []Worker, now time.Time, pol policy) bool {
	p, _ := effective(v, base, pol.rework)
	for i := range p.Stages {
		s := &p.Stages[i]
		w := v.g.Items[s.WorkItemID]
		if w != nil && needsOffer(v, w, now) && len(v.g.DependenciesMet(w.WorkItemID)) == 0 && len(candidates(v, w, workers, now)) == 0 {
			return true
		}
	}
	return false
}

func allVerified(v *view, p *plan.Plan) bool {
	for _, s := range p.Stages {
		w := v.g.Items[s.WorkItemID]
		if w == nil || (w.State != protocol.WorkVerified && w.State != protocol.WorkCancelled) {
			return false
		}
	}
	return len(p.Stages) > 0
}

func maxAttempts(w *group.WorkItem) uint64 { return max(w.Contract.RetryPolicy.MaxAttempts, 1) }

func attemptsLeft(v *view, w *group.WorkItem) bool {
	return uint64(v.item(w.WorkItemID).failures) < maxAttempts(w)
}

// retryAt is when a failed item may be offered again: the contract's
// backoff after its n-th failure, initial × multiplier^(n-1), capped.
func retryAt(l *itemLog, b protocol.Backoff) time.Time {
	if b.InitialMs == 0 || l.failures == 0 {
		return l.failedAt
	}
	ms := float64(b.InitialMs) * math.Pow(max(b.Multiplier, 1), float64(l.failures-1))
	if b.MaxMs > 0 {
		ms = min(ms, float64(b.MaxMs))
	}
	return l.failedAt.Add(time.Duration(ms) * time.Millisecond)
}

// needsOffer: open; failed with attempts left once its backoff passed; an
// offer that expired unanswered; an owner that lapsed (the next offer
// fences it with a higher ownership epoch).
func needsOffer(v *view, w *group.WorkItem, now time.Time) bool {
	switch w.State {
	case protocol.WorkOpen:
		return true
	case protocol.WorkFailed:
		return attemptsLeft(v, w) && !now.Before(retryAt(v.item(w.WorkItemID), w.Contract.RetryPolicy.Backoff))
	case protocol.WorkOffered:
		return w.Offer != nil && !now.Before(w.Offer.ExpiresAt.Time)
	}
	return lapsed(w, now)
}

// nextDeadline is the earliest time after now at which a decision may
// change without a new event (coordinator renewal, offer, start, lease,
// backoff), or the zero time.
func nextDeadline(v *view, now time.Time, leaseDuration time.Duration) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c := v.coordinator(); c != nil {
		consider(c.LeaseExpiresAt.Add(-leaseDuration / 2))
	}
	for _, w := range v.g.Items {
		switch w.State {
		case protocol.WorkOffered:
			if w.Offer != nil {
				consider(w.Offer.ExpiresAt.Time)
			}
		case protocol.WorkQueued, protocol.WorkActive, protocol.WorkBlocked:
			if w.Ownership != nil {
				consider(w.Ownership.StartDeadline.Time)
			}
			if w.Lease != nil {
				consider(w.Lease.ExpiresAt.Time)
			}
		case protocol.WorkFailed:
			consider(retryAt(v.item(w.WorkItemID), w.Contract.RetryPolicy.Backoff))
		}
	}
	return next
}
