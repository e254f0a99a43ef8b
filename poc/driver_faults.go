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
// (the held runs checkpoint at the shutdown, resume and are held again);
// then the holds are released. priority-arrival is the critical hotfix
// every run gets while Mission A's soak stages run (driver_hotfix.go),
// journaled when chosen. lease-expiry once Mission A's integration is
// held before its first checkpoint on worker-1 (after the hotfix has
// settled and Mission B's work is done);
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
	// group-disconnect and worker-restart are injected; released once
	// both are done.
	quietHolds []*Hold
	quietItems [][2]string // group, item
	// The critical hotfix (driver_hotfix.go), in every run.
	soakSeen     map[string]time.Time // soak item -> first seen running on worker-1
	prioOffered  time.Time
	prioGaveUp   bool
	prioObserved bool
	leaseHold    *Hold
	leaseItem    string
	staleLease   string // the lease worker-1 held when it was cut off
	momentWait   time.Duration
	giveUpAt     time.Time
	thwart       map[FaultName]bool
	abandonedAll bool
	humanChanges []string // groups where a human requested changes
}

func newFaultPlan(r *run, names []FaultName) *faultPlan {
	f := &faultPlan{r: r, want: map[FaultName]bool{}, done: map[FaultName]bool{}, seen: map[string]uint64{}, soakSeen: map[string]time.Time{},
		momentWait: r.opts.momentWait, thwart: map[FaultName]bool{}, giveUpAt: time.Now().Add(r.opts.Timeout / 2)}
	if f.momentWait <= 0 {
		f.momentWait = defaultMomentWait
	}
	for _, n := range names {
		f.want[n] = true
	}
	for _, n := range r.opts.thwart {
		f.thwart[n] = true
	}
	a := r.specs[0]
	if f.want[FaultGroupDisconnect] || f.want[FaultWorkerRestart] {
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
	if err := f.hotfixStep(); err != nil {
		return err
	}
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
		c, err := failoverCoordinator(r.ctx, r.journal, r.owner, old, r.coordinatorConfig(b, next, []string{worker1}), !f.thwart[FaultCoordinatorFailover])
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
		if f.thwart[FaultWorkerRestart] {
			runtime.TestHooks.NoResume.Store(true) // cleared when the run ends
		}
		if err := r.startWorker(worker1, []string{a.GroupID, b.GroupID}); err != nil {
			return fmt.Errorf("worker-restart: %w", err)
		}
		if err := f.record(Injection{Fault: FaultWorkerRestart, Since: &since, Worker: worker1, Detail: worker1 + " stopped at its safe points and started on the same store"}); err != nil {
			return err
		}
	}
	// The quiet point is over once the disconnect and the restart are.
	if f.disconnectDone() && !f.pending(FaultWorkerRestart) {
		for _, h := range f.quietHolds {
			h.Release()
		}
	}
	// lease-expiry: once Mission A's integration is held on worker-1 before its
	// first checkpoint (after the critical hotfix, which needs worker-1
	// connected, after the disconnect and the restart, whose own cut or
	// new connection would end the stall early, and once Mission B's work
	// is done), cut worker-1 off past the lease; worker-2 (started now)
	// takes the re-offer.
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
		if !f.thwart[FaultDuplicateDelivery] {
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
		if !f.thwart[FaultGroupDisconnect] {
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
			if !f.thwart[FaultLeaseExpiry] {
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
		if f.thwart[FaultChangeRequest] {
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
