package poc

import (
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// hotfixID is the critical WorkItem the driver adds to Mission A.
const hotfixID = "wi-a-hotfix"

// hotfixAfter is how long after the later soak run was first seen running
// the hotfix is offered: well inside its first one-second step, so the
// victim is busy between safe points when it is asked to yield, not
// parked at one.
const hotfixAfter = 300 * time.Millisecond

// hotfixStep drives the critical hotfix, in every run (with --faults
// priority-arrival it is that fault and journaled): once both of Mission
// A's soak stages run on worker-1 (both slots busy with long runs, safe
// points a second apart), Mission A's coordinator authority authorizes
// and offers a critical-urgency item to worker-1 (a second requirements
// analysis on the same feature request); the worker's scheduler must ask
// a running soak to yield at its next safe point to give it a slot. The
// driver reviews the hotfix itself, since it is not part of the
// coordinator's graph; it cancels it when it got no slot within
// momentWait.
func (f *faultPlan) hotfixStep() error {
	r := f.r
	a := r.specs[0]
	now := time.Now()
	if f.prioOffered.IsZero() {
		if f.prioGaveUp || !f.soaksBusy(now) {
			return nil
		}
		return f.offerHotfix(a, now)
	}
	f.cancelHotfixUnstarted(a, now)
	if err := f.acceptHotfix(a); err != nil {
		return err
	}
	if !f.prioObserved && f.priorityDone() {
		// The worker's log of the preemptions it asked for, while it is
		// short: the report and the check read the request there.
		f.prioObserved = true
		return r.observe(worker1, string(FaultPriorityArrival)+momentAfter)
	}
	return nil
}

// soaksBusy reports whether every soak stage of Mission A runs on
// worker-1 and the last to start did so hotfixAfter ago.
func (f *faultPlan) soaksBusy(now time.Time) bool {
	a := f.r.specs[0]
	var last time.Time
	n := 0
	for _, st := range a.WorkStages() {
		if st.Kind != StageSoak {
			continue
		}
		n++
		w, ok := f.r.svc.WorkItem(a.GroupID, st.WorkItemID)
		if !ok || w.State != protocol.WorkActive || w.Lease == nil || w.Lease.AgentID != worker1 {
			delete(f.soakSeen, st.WorkItemID)
			return false
		}
		if _, ok := f.soakSeen[st.WorkItemID]; !ok {
			f.soakSeen[st.WorkItemID] = now
		}
		last = maxTime(last, f.soakSeen[st.WorkItemID])
	}
	return n == SoakStages && now.Sub(last) >= hotfixAfter
}

func (f *faultPlan) offerHotfix(a MissionSpec, now time.Time) error {
	r := f.r
	src, ok := r.svc.WorkItem(a.GroupID, a.WorkStages()[0].WorkItemID)
	m, ok2 := r.svc.Mission(a.GroupID)
	if !ok || !ok2 || m.Coordinator == nil || len(src.Contract.Inputs) == 0 {
		return nil
	}
	coord := r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: m.Coordinator.AgentID}, r.keys[m.Coordinator.AgentID])
	c := src.Contract
	c.ContractID, c.Revision, c.Urgency, c.BusinessImpact = "wc-"+hotfixID, 1, protocol.UrgencyCritical, protocol.ImpactCritical
	c.Dependencies = protocol.List[protocol.Dependency]{}
	c.Deadline = protocol.NewTime(now.Add(time.Hour))
	c.Goal = "Hotfix: " + c.Goal
	if _, err := coord.Do(r.ctx, protocol.CmdWorkAuthorize, a.GroupID, &protocol.AuthorizeWorkPayload{WorkItemID: hotfixID, MissionID: a.MissionID, Contract: c}); err != nil {
		return fmt.Errorf("priority-arrival: authorize: %w", err)
	}
	to := worker1
	if f.thwart[FaultPriorityArrival] {
		to = worker2 // not running: the critical item never reaches a slot
	}
	basis := protocol.SelectionBasis{
		CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: c.RequiredCapabilities[0].ID, Required: c.RequiredCapabilities[0].Version, Offered: "1.0.0"}},
		AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
		ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(5)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
		PolicyRulesApplied: protocol.List[string]{"critical-arrival"},
	}
	if _, err := coord.Do(r.ctx, protocol.CmdWorkOffer, a.GroupID, &protocol.OfferWorkPayload{WorkItemID: hotfixID, OfferID: "off-" + hotfixID, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: to, SelectionBasis: basis}}, ExpiresAt: protocol.NewTime(now.Add(time.Minute))}); err != nil {
		return fmt.Errorf("priority-arrival: offer: %w", err)
	}
	f.prioOffered = now
	detail := fmt.Sprintf("critical %s offered to %s while both its slots ran Mission A's soak stages", hotfixID, to)
	if !f.want[FaultPriorityArrival] {
		fmt.Fprintf(r.out, "critical hotfix: %s\n", detail)
		return nil
	}
	return f.record(Injection{Fault: FaultPriorityArrival, Group: a.GroupID, WorkItem: hotfixID, Detail: detail})
}

// cancelHotfixUnstarted cancels the hotfix when it got no slot within
// momentWait, so the Mission can still be submitted for approval.
func (f *faultPlan) cancelHotfixUnstarted(a MissionSpec, now time.Time) {
	if f.prioGaveUp || now.Sub(f.prioOffered) < f.momentWait {
		return
	}
	w, ok := f.r.svc.WorkItem(a.GroupID, hotfixID)
	if !ok || w.Lease != nil || w.State != protocol.WorkOpen && w.State != protocol.WorkOffered && w.State != protocol.WorkQueued {
		return
	}
	f.prioGaveUp = true
	fmt.Fprintf(f.r.out, "fault %s: %s got no slot within %s; it is cancelled\n", FaultPriorityArrival, hotfixID, f.momentWait)
	if m, ok := f.r.svc.Mission(a.GroupID); ok && m.Coordinator != nil {
		coord := f.r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: m.Coordinator.AgentID}, f.r.keys[m.Coordinator.AgentID])
		if _, err := coord.Do(f.r.ctx, protocol.CmdWorkCancel, a.GroupID, &protocol.CancelWorkPayload{WorkItemID: hotfixID, Reason: "the critical item got no slot"}); err != nil {
			f.r.fail(fmt.Errorf("priority-arrival: cancel %s: %w", hotfixID, err))
		}
	}
}

// priorityDone reports whether the hotfix is over: not offered (its moment
// passed, or abandoned), or settled, and every run worker-1 was asked to
// preempt for it has stopped (its checkpoint is in the log, or it ran to
// its end).
func (f *faultPlan) priorityDone() bool {
	if f.prioGaveUp {
		return true
	}
	if f.prioOffered.IsZero() {
		// Not offered yet: done once the soak stages are over.
		return f.soaksOver()
	}
	w, ok := f.r.svc.WorkItem(f.r.specs[0].GroupID, hotfixID)
	if ok && w.State != protocol.WorkVerified && w.State != protocol.WorkFailed && w.State != protocol.WorkCancelled {
		return false
	}
	wr := f.r.worker(worker1)
	if wr == nil {
		return true
	}
	for _, p := range wr.w.Status().Preemptions {
		if p.Reason != "scheduler" {
			continue
		}
		v, ok := f.r.svc.WorkItem(p.GroupID, p.WorkItemID)
		if ok && v.State == protocol.WorkActive && v.Checkpoint == nil {
			return false
		}
	}
	return true
}

// soaksOver reports whether every soak stage of Mission A is verified.
func (f *faultPlan) soaksOver() bool {
	a := f.r.specs[0]
	for _, st := range a.WorkStages() {
		if st.Kind != StageSoak {
			continue
		}
		if w, ok := f.r.svc.WorkItem(a.GroupID, st.WorkItemID); !ok || w.State != protocol.WorkVerified {
			return false
		}
	}
	return true
}
