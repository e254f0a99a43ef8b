package poc

import (
	"fmt"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
)

// faultPlan injects the chosen faults, for real, and journals each
// injection (CheckFaults judges them afterwards from the durable stores).
// It does not wait for a fault's moment to happen by chance: it makes it,
// through holds in worker-1's handlers (Holds) that keep runs where the
// fault needs them until it is injected. It is stepped by the drive loop
// after every change of the Missions' logs or the holds.
//
// Order: coordinator-failover at once; duplicate-delivery once grp-a has
// ten events. Then the quiet point: both testing stages held at their
// first safe point on worker-1, both slots busy, nothing offered or
// accepted in flight (the next stages wait for these), only lease
// renewals going out. There, in turn: group-disconnect, worker-restart
// (the held runs checkpoint at the shutdown, resume and are held again),
// priority-arrival; then the holds are released. lease-expiry once Mission
// A's integration is held before its first checkpoint on worker-1 (after
// priority-arrival has settled and Mission B's work is done);
// change-request on Mission A's first submission for approval.
type faultPlan struct {
	r    *run
	want map[FaultName]bool
	done map[FaultName]bool
	// pending actions that finish later (a cut link coming back up).
	disconnectBackAt time.Time // the bound of the cut; set while it is in progress
	disconnectCutAt  time.Time
	disconnectUpAt   time.Time // when the link was restored
	// duplicate-delivery in progress: asked at, the worker's duplicate
	// count then, and how many duplicates the redelivery should give.
	dupAsked    time.Time
	dupBefore   float64
	dupWant     float64
	stallBackAt time.Time
	stall       Injection
	seen        map[string]uint64 // group -> events already scanned

	// The quiet point: the testing stages held on worker-1 while
	// group-disconnect, worker-restart and priority-arrival are injected;
	// with priority-arrival the holds are released once the critical item
	// started (or after momentWait), else once the other two are done.
	quietHolds   []*Hold
	quietItems   [][2]string // group, item
	prioOffered  time.Time
	prioGaveUp   bool
	prioObserved bool
	leaseHold    *Hold
	leaseItem    string
	staleLease   string // the lease worker-1 held when it was cut off
	momentWait   time.Duration
	giveUpAt     time.Time
	thwart       FaultName
	abandonedAll bool
	humanChanges []string // groups where a human requested changes
}

func newFaultPlan(r *run, names []FaultName) *faultPlan {
	f := &faultPlan{r: r, want: map[FaultName]bool{}, done: map[FaultName]bool{}, seen: map[string]uint64{},
		momentWait: r.opts.momentWait, thwart: r.opts.thwart, giveUpAt: time.Now().Add(r.opts.Timeout / 2)}
	if f.momentWait <= 0 {
		f.momentWait = defaultMomentWait
	}
	for _, n := range names {
		f.want[n] = true
	}
	a := r.specs[0]
	if f.want[FaultPriorityArrival] || f.want[FaultGroupDisconnect] || f.want[FaultWorkerRestart] {
		for _, spec := range r.specs {
			if id := stageOf(spec, StageTesting); id != "" {
				f.quietHolds = append(f.quietHolds, r.holds.Arm(worker1, spec.GroupID, id, HoldAtSafePoint))
				f.quietItems = append(f.quietItems, [2]string{spec.GroupID, id})
			}
		}
	}
	if f.want[FaultLeaseExpiry] {
		f.leaseItem = stageOf(a, StageIntegration)
		f.leaseHold = r.holds.Arm(worker1, a.GroupID, f.leaseItem, HoldAtStart)
	}
	return f
}

// defaultMomentWait bounds how long the driver waits for the protocol to
// react to a made moment (the critical item to get a slot) before it lets
// the held runs go and leaves the verdict to the checks.
const defaultMomentWait = 20 * time.Second

// stageOf is the WorkItem of spec's first stage of kind, "" when none.
func stageOf(spec MissionSpec, kind StageKind) string {
	for _, st := range spec.WorkStages() {
		if st.Kind == kind {
			return st.WorkItemID
		}
	}
	return ""
}

func (f *faultPlan) pending(n FaultName) bool { return f.want[n] && !f.done[n] }

func (f *faultPlan) record(in Injection) error {
	f.done[in.Fault] = true
	in.At = protocol.NewTime(time.Now())
	fmt.Fprintf(f.r.out, "fault %s injected: %s\n", in.Fault, in.Detail)
	return f.r.journal.Record(in)
}

// scan notes, from the new events, the Groups where a human requested
// changes.
func (f *faultPlan) scan() {
	if f.r.opts.AutoApprove {
		return
	}
	for _, spec := range f.r.specs {
		g := spec.GroupID
		evs, err := f.r.svc.Events(g, f.seen[g], 0)
		if err != nil {
			continue
		}
		for _, se := range evs {
			f.seen[g] = se.Sequence
			if se.Type == protocol.EvtMissionChangesRequested {
				f.humanChanges = append(f.humanChanges, g)
			}
		}
	}
}

// step injects whatever fault is due now.
func (f *faultPlan) step() error {
	r := f.r
	if len(f.want) == 0 {
		return nil
	}
	f.scan()
	a, b := r.specs[0], r.specs[1]
	now := time.Now()
	// change-request with a human: the MissionOwner's own request for
	// changes (page or terminal) is the injection.
	if f.pending(FaultChangeRequest) && len(f.humanChanges) > 0 {
		if err := f.record(Injection{Fault: FaultChangeRequest, Group: f.humanChanges[0],
			Detail: "the MissionOwner requested changes on " + f.humanChanges[0]}); err != nil {
			return err
		}
	}
	if now.After(f.giveUpAt) && !f.abandonedAll {
		f.abandon("its moment did not come within " + (r.opts.Timeout / 2).String())
	}
	// coordinator-failover: right away on Mission B.
	if f.pending(FaultCoordinatorFailover) {
		next := "coord-" + b.GroupID + "-2"
		if err := r.joinAgent(next, protocol.RoleCoordinator); err != nil {
			return err
		}
		r.mu.Lock()
		old := r.coords[b.MissionID]
		r.mu.Unlock()
		c, err := failoverCoordinator(r.ctx, r.journal, r.owner, old, r.coordinatorConfig(b, next, []string{worker1}), f.thwart != FaultCoordinatorFailover)
		f.done[FaultCoordinatorFailover] = true
		if err != nil {
			return fmt.Errorf("coordinator-failover: %w", err)
		}
		r.runCoordinator(b, c)
		fmt.Fprintf(r.out, "fault %s injected: %s replaced by %s\n", FaultCoordinatorFailover, old.cfg.AgentID, next)
	}
	// duplicate-delivery: once worker-1 holds part of grp-a, have the
	// authority send it all again; journal it once worker-1 counted the
	// duplicates it dropped (its own metric), or after dupWait.
	if f.pending(FaultDuplicateDelivery) {
		if err := f.duplicateDelivery(a, now); err != nil {
			return err
		}
	}
	// group-disconnect: at the quiet point, cut worker-1's connection until
	// it has buffered a command offline (a lease renewal comes due within
	// pocLease/2) or disconnectMax passed; journal it once worker-1 is back
	// online with its buffer reconciled.
	if f.pending(FaultGroupDisconnect) {
		if err := f.groupDisconnect(b, now); err != nil {
			return err
		}
	}
	// worker-restart: at the quiet point (after the disconnect), stop
	// worker-1 and start it again on the same store.
	if f.pending(FaultWorkerRestart) && f.disconnectDone() && f.quiet() {
		since := protocol.NewTime(now)
		if err := r.stopWorker(worker1); err != nil {
			return fmt.Errorf("worker-restart: %w", err)
		}
		if f.thwart == FaultWorkerRestart {
			runtime.TestHooks.NoResume.Store(true) // cleared when the run ends
		}
		if err := r.startWorker(worker1, []string{a.GroupID, b.GroupID}); err != nil {
			return fmt.Errorf("worker-restart: %w", err)
		}
		if err := f.record(Injection{Fault: FaultWorkerRestart, Since: &since, Worker: worker1, Detail: worker1 + " stopped at its safe points and started on the same store"}); err != nil {
			return err
		}
	}
	// priority-arrival: at the quiet point again (after the restart, the
	// held runs resumed and are held again), a critical item while both of
	// worker-1's slots are busy.
	if f.want[FaultPriorityArrival] && f.disconnectDone() && !f.pending(FaultWorkerRestart) {
		if err := f.priorityArrival(a, now); err != nil {
			return err
		}
	} else if !f.want[FaultPriorityArrival] && f.disconnectDone() && !f.pending(FaultWorkerRestart) {
		for _, h := range f.quietHolds {
			h.Release()
		}
	}
	// lease-expiry: once Mission A's integration is held on worker-1 before its
	// first checkpoint (after the priority arrival, which needs worker-1
	// connected, after the disconnect and the restart, whose own cut or
	// new connection would end the stall early, and once Mission B's work
	// is done), cut worker-1 off past the lease; worker-2 (started now)
	// takes the re-offer.
	if f.want[FaultPriorityArrival] && f.done[FaultPriorityArrival] && !f.prioObserved && f.priorityDone() {
		// The worker's log of the preemptions it asked for, while it is
		// short: the check reads the request of the critical item there.
		f.prioObserved = true
		if err := r.observe(worker1, string(FaultPriorityArrival)+momentAfter); err != nil {
			return err
		}
	}
	if f.pending(FaultLeaseExpiry) && f.priorityDone() && f.disconnectDone() && !f.pending(FaultWorkerRestart) && f.missionWorkDone(b) {
		if err := f.leaseExpiry(a, now); err != nil {
			return err
		}
	}
	return nil
}

func (f *faultPlan) disconnectDone() bool { return !f.pending(FaultGroupDisconnect) }

// How long the driver waits for the worker's own account of a fault.
const (
	dupWait       = 3 * time.Second // the redelivered events to be counted
	disconnectMax = 2500 * time.Millisecond
	reconcileWait = 5 * time.Second // back online with the buffer reconciled
)

// duplicateDelivery asks the authority to send grp-a's events again to
// worker-1 and journals it once worker-1's duplicate counter rose by the
// events it held (or dupWait passed): the check compares the two
// observations.
func (f *faultPlan) duplicateDelivery(a MissionSpec, now time.Time) error {
	r := f.r
	wr := r.worker(worker1)
	if wr == nil {
		return nil
	}
	if f.dupAsked.IsZero() {
		if r.svc.LastSequence(a.GroupID) < 10 {
			return nil
		}
		o, err := observe(worker1, string(FaultDuplicateDelivery)+momentBefore, wr.w, now)
		if err != nil {
			return err
		}
		if err := appendObservation(r.path(ObservationsFile), o); err != nil {
			return err
		}
		f.dupBefore, f.dupAsked = o.Counter(seriesDuplicates), now
		for _, g := range wr.w.Status().Groups {
			if g.GroupID == a.GroupID {
				f.dupWant = float64(g.Cursor)
			}
		}
		if f.thwart != FaultDuplicateDelivery {
			wr.w.Redeliver(a.GroupID, 0)
		}
		return nil
	}
	o, err := observe(worker1, string(FaultDuplicateDelivery)+momentAfter, wr.w, now)
	if err != nil {
		return err
	}
	if o.Counter(seriesDuplicates)-f.dupBefore < max(f.dupWant, 1) && now.Sub(f.dupAsked) < dupWait {
		return nil
	}
	if err := appendObservation(r.path(ObservationsFile), o); err != nil {
		return err
	}
	since := protocol.NewTime(f.dupAsked)
	return f.record(Injection{Fault: FaultDuplicateDelivery, Since: &since, Worker: worker1, Group: a.GroupID, Sequence: 0,
		Detail: fmt.Sprintf("%s asked for %s's events after 0 again, at %d", worker1, a.GroupID, r.svc.LastSequence(a.GroupID))})
}

// groupDisconnect cuts worker-1's link at the quiet point, restores it once
// worker-1 buffered a command offline (or disconnectMax passed), and
// journals the fault once worker-1 is online again with nothing left in
// its buffer (or reconcileWait passed). Observations before and after let
// the check count the reconnections and the commands reconciled.
func (f *faultPlan) groupDisconnect(b MissionSpec, now time.Time) error {
	r := f.r
	wr := r.worker(worker1)
	switch {
	case f.disconnectBackAt.IsZero():
		if !f.quiet() || wr == nil {
			return nil
		}
		if err := r.observe(worker1, string(FaultGroupDisconnect)+momentBefore); err != nil {
			return err
		}
		if f.thwart != FaultGroupDisconnect {
			r.links[worker1].Cut(disconnectMax)
		}
		f.disconnectCutAt, f.disconnectBackAt = now, now.Add(disconnectMax)
		fmt.Fprintf(r.out, "fault %s: %s's connection cut while %s\n", FaultGroupDisconnect, worker1, f.heldText())
	case f.disconnectUpAt.IsZero():
		if wr == nil || (wr.w.Status().Buffered == 0 || now.Sub(f.disconnectCutAt) < 300*time.Millisecond) && now.Before(f.disconnectBackAt) {
			return nil
		}
		r.links[worker1].Restore()
		f.disconnectUpAt = now
	default:
		st := wr.w.Status()
		if (st.Offline != "online" || st.Buffered > 0 || st.Connection != "connected") && now.Sub(f.disconnectUpAt) < reconcileWait {
			return nil
		}
		if err := r.observe(worker1, string(FaultGroupDisconnect)+momentAfter); err != nil {
			return err
		}
		since := protocol.NewTime(f.disconnectCutAt)
		return f.record(Injection{Fault: FaultGroupDisconnect, Since: &since, Worker: worker1, Group: b.GroupID, Sequence: r.svc.LastSequence(b.GroupID),
			Detail: fmt.Sprintf("connection cut for %s and restored", f.disconnectUpAt.Sub(f.disconnectCutAt).Round(time.Millisecond))})
	}
	return nil
}

// missionWorkDone reports whether spec's Mission has no work left to run
// (it awaits approval or was decided). The lease-expiry stall cuts
// worker-1's only connection, which would stall Mission B's work too (and
// an offer made to worker-1 while it is cut off can sit until it expires),
// so it waits for Mission B to be done.
func (f *faultPlan) missionWorkDone(spec MissionSpec) bool {
	m, ok := f.r.svc.Mission(spec.GroupID)
	return ok && m.State != protocol.MissionActive
}

// leaseExpiry stalls worker-1 on Mission A's integration (its last stage), held before its first
// checkpoint (a checkpoint would let the owner keep a bounded ownership
// hold after the lease): its link is cut for longer than the lease, the
// coordinator re-offers with a higher epoch to worker-2, and worker-1's
// late run never completes the item.
func (f *faultPlan) leaseExpiry(a MissionSpec, now time.Time) error {
	r := f.r
	if !f.stallBackAt.IsZero() {
		// Keep worker-1 cut off until the item was taken over under a
		// higher ownership epoch (or the bound passed), then let it back.
		w, _ := r.svc.WorkItem(a.GroupID, f.stall.WorkItem)
		if w.Ownership != nil && w.Ownership.OwnershipEpoch > f.stall.Epoch || now.After(f.stallBackAt) {
			r.links[worker1].Restore()
			f.leaseHold.Release()
			if f.thwart != FaultLeaseExpiry {
				f.stall.Code = f.lateSubmit(a)
			}
			return f.record(f.stall)
		}
		return nil
	}
	if !f.leaseHold.Holding() {
		return nil
	}
	id := f.leaseItem
	w, ok := r.svc.WorkItem(a.GroupID, id)
	if !ok || w.State != protocol.WorkActive || w.Lease == nil || w.Lease.AgentID != worker1 {
		return nil
	}
	// Long enough for the lease and any ownership hold to lapse and the
	// re-offer to be taken; restored as soon as that happened.
	stall := 4*pocLease + pocStartWithin
	r.links[worker1].Cut(stall)
	// The second worker comes up now, in time to win the re-offer.
	if r.worker(worker2) == nil {
		if err := r.startWorker(worker2, []string{a.GroupID}); err != nil {
			return fmt.Errorf("lease-expiry: %w", err)
		}
	}
	f.stallBackAt = now.Add(stall)
	since := protocol.NewTime(now)
	f.staleLease = w.Lease.LeaseID
	f.stall = Injection{Fault: FaultLeaseExpiry, Since: &since, Worker: worker1, Group: a.GroupID, WorkItem: id, Epoch: w.Lease.OwnershipEpoch,
		Detail: fmt.Sprintf("%s cut off (at most %s, until the item was taken over) while holding %s's lease %s", worker1, stall, id, w.Lease.LeaseID)}
	fmt.Fprintf(r.out, "fault %s: %s stalled on %s (lease %s, %s) for at most %s\n", FaultLeaseExpiry, worker1, id, w.Lease.LeaseID, pocLease, stall)
	return nil
}

// lateSubmit has the old owner, worker-1, submit a result for the stalled
// item under its fenced epoch and lease, signed with its own key, as a
// worker that came back late would. The authority must refuse it and keep
// it as a late result (the check reads the audit store); the answer's
// code is returned for the journal.
func (f *faultPlan) lateSubmit(a MissionSpec) protocol.Code {
	r := f.r
	me := r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: worker1}, r.keys[worker1])
	digest := protocol.Digest([]byte("late result of " + f.stall.WorkItem))
	_, err := me.Do(r.ctx, protocol.CmdWorkSubmit, a.GroupID, &protocol.SubmitWorkPayload{WorkItemID: f.stall.WorkItem, OwnershipEpoch: f.stall.Epoch,
		LeaseID: f.staleLease, Artifacts: protocol.List[string]{digest}, Evidence: protocol.List[protocol.Evidence]{{
			Subject: f.stall.WorkItem, Criteria: protocol.List[string]{"ac-int-applied"}, Method: "late result of a fenced owner", Result: protocol.EvidencePass,
			Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: worker1}, Timestamp: protocol.NewTime(time.Now()), Artifacts: protocol.List[string]{digest}}}})
	code := protocol.CodeOf(err)
	fmt.Fprintf(r.out, "fault %s: %s's late work.submit under epoch %d answered %q\n", FaultLeaseExpiry, worker1, f.stall.Epoch, code)
	return code
}

// giveUp ends the faults whose moment has passed (every Mission's work is
// done) and that are not in progress; they are reported not injected.
// change-request waits for the approvals: with a human, until every
// Mission is approved without one.
func (f *faultPlan) giveUp(allApproved bool) {
	for n := range f.want {
		if f.done[n] || n == FaultChangeRequest && (f.r.opts.AutoApprove || !allApproved) {
			continue
		}
		if n == FaultLeaseExpiry && !f.stallBackAt.IsZero() {
			continue
		}
		if n == FaultGroupDisconnect && !f.disconnectBackAt.IsZero() {
			continue
		}
		f.done[n] = true
		fmt.Fprintf(f.r.out, "fault %s: no opportunity left, not injected\n", n)
	}
}

// abandon gives up every fault not injected yet and lets every held run
// go, so the run ends and the report shows what was not injected.
func (f *faultPlan) abandon(why string) {
	f.abandonedAll = true
	f.r.holds.ReleaseAll()
	f.prioGaveUp = true
	for _, n := range AllFaults {
		if f.pending(n) && !(n == FaultLeaseExpiry && !f.stallBackAt.IsZero()) && !(n == FaultGroupDisconnect && !f.disconnectBackAt.IsZero()) {
			f.done[n] = true
			fmt.Fprintf(f.r.out, "fault %s: not injected, %s\n", n, why)
		}
	}
}

// holdApproval keeps auto-approve off a Mission until the faults that
// need it unfinished are injected: change-request is injected on Mission
// A's first submission.
func (f *faultPlan) holdApproval(spec MissionSpec) bool {
	r := f.r
	if spec.MissionID != r.specs[0].MissionID {
		return false
	}
	if f.pending(FaultChangeRequest) {
		changes := []string{"document the new function in the README"}
		var err error
		if f.thwart == FaultChangeRequest {
			err = r.journal.Record(Injection{Fault: FaultChangeRequest, At: protocol.NewTime(time.Now()), Group: spec.GroupID, Detail: changes[0]})
		} else {
			err = RequestChanges(r.ctx, r.journal, r.owner, spec, changes, "please also document it", time.Now())
		}
		f.done[FaultChangeRequest] = true
		if err != nil {
			r.fail(fmt.Errorf("change-request: %w", err))
			return false
		}
		fmt.Fprintf(r.out, "fault %s injected on %s\n", FaultChangeRequest, spec.MissionID)
		return true
	}
	return !f.finished()
}

// finished reports whether every chosen fault was injected.
func (f *faultPlan) finished() bool {
	for n := range f.want {
		if !f.done[n] {
			return false
		}
	}
	return true
}

// hotfixID is the critical WorkItem priority-arrival injects into Mission A.
const hotfixID = "wi-a-hotfix"

// priorityArrival: once both testing stages are held at their first
// safe point on worker-1 (so both of its slots are busy and neither frees
// itself), Mission A's coordinator authority authorizes and offers a
// critical-urgency item to worker-1 (a second requirements analysis on
// the same feature request); the worker's scheduler must preempt a
// running item at its safe point to give the critical item a slot. The
// holds are released once the critical item started (or after
// momentWait). The driver reviews the hotfix itself, since it is not part
// of the coordinator's graph.
func (f *faultPlan) priorityArrival(a MissionSpec, now time.Time) error {
	r := f.r
	if f.done[FaultPriorityArrival] {
		f.releasePriorityHolds(a, now)
		return f.acceptHotfix(a)
	}
	if !f.quiet() {
		return nil
	}
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
	if f.thwart == FaultPriorityArrival {
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
	return f.record(Injection{Fault: FaultPriorityArrival, Group: a.GroupID, WorkItem: hotfixID,
		Detail: fmt.Sprintf("critical %s offered to %s while %s", hotfixID, to, f.heldText())})
}

// quiet reports whether the quiet point is reached: both testing stages
// wait at their holds on worker-1, each with worker-1's lease.
func (f *faultPlan) quiet() bool {
	if len(f.quietHolds) < slotsPerWk {
		return false
	}
	for i, h := range f.quietHolds {
		w, ok := f.r.svc.WorkItem(f.quietItems[i][0], f.quietItems[i][1])
		if !h.Holding() || !ok || w.State != protocol.WorkActive || w.Lease == nil || w.Lease.AgentID != worker1 {
			return false
		}
	}
	return true
}

// heldText names the held runs.
func (f *faultPlan) heldText() string {
	held := make([]string, len(f.quietItems))
	for i, it := range f.quietItems {
		held[i] = it[1]
	}
	return fmt.Sprintf("its %d slots were held by %s", slotsPerWk, strings.Join(held, ", "))
}

// releasePriorityHolds lets the held testing runs go once the critical
// item has a slot, or once momentWait has passed without it getting one.
func (f *faultPlan) releasePriorityHolds(a MissionSpec, now time.Time) {
	if f.prioGaveUp || len(f.quietHolds) == 0 || f.quietHolds[0].Released() {
		return
	}
	w, ok := f.r.svc.WorkItem(a.GroupID, hotfixID)
	started := ok && (w.Lease != nil || w.State == protocol.WorkSubmitted || w.State == protocol.WorkVerified)
	if !started && now.Sub(f.prioOffered) < f.momentWait {
		return
	}
	for _, h := range f.quietHolds {
		h.Release()
	}
	if started {
		return
	}
	f.prioGaveUp = true
	fmt.Fprintf(f.r.out, "fault %s: %s got no slot within %s; the held runs go on and it is cancelled\n", FaultPriorityArrival, hotfixID, f.momentWait)
	// Cancelled, so the Mission can still be submitted for approval.
	if m, ok := f.r.svc.Mission(a.GroupID); ok && m.Coordinator != nil {
		coord := f.r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: m.Coordinator.AgentID}, f.r.keys[m.Coordinator.AgentID])
		if _, err := coord.Do(f.r.ctx, protocol.CmdWorkCancel, a.GroupID, &protocol.CancelWorkPayload{WorkItemID: hotfixID, Reason: "the critical item got no slot"}); err != nil {
			f.r.fail(fmt.Errorf("priority-arrival: cancel %s: %w", hotfixID, err))
		}
	}
}

// acceptHotfix reviews the injected item like the coordinator would: its
// submission is accepted under the current coordinator epoch.
func (f *faultPlan) acceptHotfix(a MissionSpec) error {
	r := f.r
	w, ok := r.svc.WorkItem(a.GroupID, hotfixID)
	if !ok || w.State != protocol.WorkSubmitted {
		return nil
	}
	m, _ := r.svc.Mission(a.GroupID)
	if m.Coordinator == nil {
		return nil
	}
	coord := r.svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: m.Coordinator.AgentID}, r.keys[m.Coordinator.AgentID])
	_, err := coord.Do(r.ctx, protocol.CmdWorkAcceptResult, a.GroupID, &protocol.AcceptResultPayload{WorkItemID: hotfixID, ContractRevision: w.Contract.Revision,
		Comment: "hotfix reviewed by the PoC driver"})
	return err
}

// priorityDone reports whether priority-arrival is over: not chosen, or
// injected and its critical item settled (the preemption and the resume
// happen while worker-1 is left undisturbed).
func (f *faultPlan) priorityDone() bool {
	if !f.want[FaultPriorityArrival] {
		return true
	}
	if !f.done[FaultPriorityArrival] {
		return false
	}
	if f.prioGaveUp {
		return true
	}
	w, ok := f.r.svc.WorkItem(f.r.specs[0].GroupID, hotfixID)
	if ok && w.State != protocol.WorkVerified && w.State != protocol.WorkFailed && w.State != protocol.WorkCancelled {
		return false
	}
	// The critical item may have taken a slot that freed by itself while
	// the victim was still on its way to a safe point: the cycle is over
	// only once every run worker-1 was asked to preempt has stopped (its
	// checkpoint is in the log, or it ran to its end).
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
