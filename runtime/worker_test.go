package runtime

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/slots"
)

func hasLine(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

// The whole 11.3 cycle over authority-lite and real wss: the worker accepts
// two offers, starts both, renews their leases; a critical item arrives
// while both slots are busy, the victim checkpoints at a safe point, the
// critical item starts in its slot and is submitted and accepted; the victim
// later resumes from its checkpoint and is submitted too.
func TestWorkerEndToEndPreemptionCycle(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	if st := tw.w.Status(); st.SessionEpoch != 1 {
		t.Fatalf("session epoch %d, want 1", st.SessionEpoch)
	}
	k.member("w1")
	tw.w.AddGroup("grp-a")
	cycleAdmitsAndRenews(t, k, tw)
	victim, other := cyclePreempts(t, k, tw)

	h.release("wi-3")
	k.until("wi-3 submitted", func() bool { return k.state("wi-3") == protocol.WorkSubmitted }, tw)
	k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-3", ContractRevision: 1})

	h.release(other)
	h.release(victim)
	k.until("all submitted", func() bool {
		return k.state("wi-1") == protocol.WorkSubmitted && k.state("wi-2") == protocol.WorkSubmitted
	}, tw)
	for _, id := range []string{"wi-1", "wi-2"} {
		k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
	}
	cycleLogInOrder(t, k, h, victim)
	cycleStoreAgrees(t, k, tw)
}

// cycleAdmitsAndRenews: two items admitted and run, selected with a basis,
// the Mission's priority class in the worker's view, both leases renewed
// at half their time.
func cycleAdmitsAndRenews(t *testing.T, k *wkit, tw *testWorker) {
	t.Helper()
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	st := k.waitFor("both running", runningAll("wi-1", "wi-2"), tw)
	if len(st.Admissions) != 2 || !st.Admissions[0].Accepted || len(st.Admissions[0].Basis.CapabilityMatches) != 1 {
		t.Fatalf("admissions %+v", st.Admissions)
	}
	if len(st.Selections) != 2 || len(st.Selections[0].Basis.PolicyRulesApplied.Names()) == 0 {
		t.Fatalf("selections %+v", st.Selections)
	}
	// The Mission's priority class reaches the worker's view (authority-lite
	// nests the Mission record in mission.created).
	if len(st.Groups) != 1 || st.Groups[0].PriorityClass != protocol.PriorityHigh {
		t.Fatalf("groups %+v, want grp-a with priority high", st.Groups)
	}

	// Renewal at half the lease: 2 min leases, renewed after 61 s.
	k.fc.Advance(61 * time.Second)
	k.until("leases renewed", func() bool {
		return len(k.item("wi-1").Lease.Renewals) == 1 && len(k.item("wi-2").Lease.Renewals) == 1
	}, tw)
	k.waitFor("renewed expiry applied", func(s WorkerStatus) bool {
		for _, r := range s.Running {
			if !r.LeaseExpiresAt.Equal(k.fc.Now().Add(2 * time.Minute)) {
				return false
			}
		}
		return len(s.Running) == 2
	}, tw)
}

// cyclePreempts offers a critical item while both slots are busy. Once it
// has waited past its aging key (critical: 1 s × 40 %) it ranks above the
// running items, which are past theirs too: one of them is preempted,
// checkpoints and is queued again. It returns the victim and the other.
func cyclePreempts(t *testing.T, k *wkit, tw *testWorker) (victim, other string) {
	t.Helper()
	k.offer("wi-3", protocol.UrgencyCritical, "w1")
	k.until("wi-3 accepted", func() bool { return k.state("wi-3") == protocol.WorkQueued }, tw)
	k.fc.Advance(time.Second)
	st := k.waitFor("critical item running", runningAll("wi-3"), tw)
	if len(st.Preemptions) != 1 || st.Preemptions[0].Reason != "scheduler" || st.Preemptions[0].For != "grp-a/wi-3" {
		t.Fatalf("preemptions %+v", st.Preemptions)
	}
	victim = st.Preemptions[0].WorkItemID
	other = map[string]string{"wi-1": "wi-2", "wi-2": "wi-1"}[victim]
	if k.state(victim) != protocol.WorkQueued || k.item(victim).Checkpoint == nil {
		t.Fatalf("victim %s: %s, checkpoint %v", victim, k.state(victim), k.item(victim).Checkpoint)
	}
	return victim, other
}

// cycleLogInOrder: the authority's log tells the cycle in order, the victim
// resumed from its checkpoint, every result accepted and its artifact
// published.
func cycleLogInOrder(t *testing.T, k *wkit, h *stepHandler, victim string) {
	t.Helper()
	tr := k.trace()
	cp := hasLine(tr, "work.checkpointed "+victim+" by w1 reason=preempted")
	start3 := hasLine(tr, "work.started wi-3 by w1")
	resumed := hasLine(tr, "work.started "+victim+" by w1 resumed")
	sub3 := hasLine(tr, "work.submitted wi-3 by w1")
	subV := hasLine(tr, "work.submitted "+victim+" by w1")
	if cp < 0 || start3 < cp || resumed < start3 || sub3 < start3 || subV < resumed {
		t.Fatalf("cycle out of order (checkpoint %d, start wi-3 %d, resume %d, submit wi-3 %d, submit victim %d):\n%s",
			cp, start3, resumed, sub3, subV, strings.Join(tr, "\n"))
	}
	if got := h.history(victim); !slices.Equal(got, []string{"fresh", "resumed:0"}) {
		t.Fatalf("victim runs %v, want a fresh run and a resume from its checkpoint", got)
	}
	for _, id := range []string{"wi-1", "wi-2", "wi-3"} {
		if hasLine(tr, "work.result.accepted "+id) < 0 {
			t.Fatalf("%s not accepted:\n%s", id, strings.Join(tr, "\n"))
		}
	}
	published := 0
	for _, ev := range k.events() {
		if ev.Type == protocol.EvtArtifactPublished {
			published++
		}
	}
	if published != 3 {
		t.Fatalf("%d artifacts published, want 3", published)
	}
}

// cycleStoreAgrees: once caught up and stopped, the worker's store shows
// every item verified and owned by it, and Status the four outcomes.
func cycleStoreAgrees(t *testing.T, k *wkit, tw *testWorker) {
	t.Helper()
	k.caughtUp(tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
	st := tw.w.Status()
	store, err := queue.Open(tw.dir, queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, id := range []string{"wi-1", "wi-2", "wi-3"} {
		if e, _ := store.Item("grp-a", id); e.State != protocol.WorkVerified || e.Owner != "w1" {
			t.Fatalf("worker store: %s is %s owned by %q", id, e.State, e.Owner)
		}
	}
	if n := len(st.Outcomes); n != 4 {
		t.Fatalf("outcomes %+v, want 3 completed and 1 preempted", st.Outcomes)
	}
}

// stubbornHandler never honours a preemption request: it takes one
// checkpoint, then runs until the test releases it or its context ends.
type stubbornHandler struct {
	release   chan struct{}
	cancelled atomic.Int32 // runs that saw their context end
	asked     atomic.Int32 // runs that saw the preemption request
}

func (h *stubbornHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h *stubbornHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	id := w.Slot().WorkItemID
	if _, err := w.Checkpoint(ctx, []byte("0"), checkpoint.Meta{Phase: "started"}); err != nil {
		return slots.Result{}, err
	}
	if id != "wi-1" {
		<-h.release // only wi-1 is stubborn; the others wait like it
	} else {
		preempt := w.PreemptRequested()
	wait:
		for {
			select {
			case <-h.release:
				break wait
			case <-preempt:
				h.asked.Add(1) // seen, and ignored: no safe point here
				preempt = nil
			case <-ctx.Done():
				h.cancelled.Add(1)
				return slots.Result{}, ctx.Err()
			}
		}
	}
	d, err := w.PublishArtifact(ctx, "text/x-diff", []byte("--- a/"+id+"\n"))
	if err != nil {
		return slots.Result{}, err
	}
	ev := protocol.Evidence{Subject: id, Criteria: protocol.List[string]{"ac-1", "ac-2"}, Method: "deterministic-test", Result: protocol.EvidencePass,
		Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Timestamp: protocol.NewTime(t0), Artifacts: protocol.List[string]{d}}
	return slots.Result{Artifacts: []string{d}, Evidence: []protocol.Evidence{ev}}, nil
}

// stubbornKit runs wi-1 on a one-slot worker whose handler ignores
// preemption, then offers the critical wi-2 so that the scheduler asks wi-1
// to yield, and lets PreemptTimeout pass.
func stubbornKit(t *testing.T) (*wkit, *stubbornHandler, *testWorker) {
	k := newWKit(t)
	h := &stubbornHandler{release: make(chan struct{})}
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.PreemptTimeout = 10 * time.Second
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyLow, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.fc.Advance(61 * time.Second) // past wi-1's aging key; its lease is renewed
	k.nudgeUntil("wi-1 lease renewed", func() bool { return len(k.item("wi-1").Lease.Renewals) == 1 }, tw)
	k.waitFor("renewed expiry applied", func(s WorkerStatus) bool {
		return len(s.Running) == 1 && s.Running[0].LeaseExpiresAt.Equal(k.item("wi-1").Lease.ExpiresAt.Time)
	}, tw)

	k.offer("wi-2", protocol.UrgencyCritical, "w1")
	k.until("wi-2 accepted", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)
	k.fc.Advance(time.Second)
	k.nudgeUntil("wi-1 asked to yield", func() bool { return len(tw.w.Status().Preemptions) == 1 }, tw)
	k.until("the handler sees the request", func() bool { return h.asked.Load() == 1 }, tw)
	k.fc.Advance(10 * time.Second)
	k.nudgeUntil("preemption refused", func() bool { s := tw.w.Status(); return len(s.Preemptions) == 1 && s.Preemptions[0].RefusedAt != nil }, tw)
	st := tw.w.Status()
	if p := st.Preemptions[0]; p.WorkItemID != "wi-1" || p.For != "grp-a/wi-2" || p.Reason != "scheduler" {
		t.Fatalf("preemption %+v", p)
	}
	return k, h, tw
}

// A run that reaches no safe point is never interrupted for a preemption
// (spec 11.3): it keeps its slot and its lease past PreemptTimeout, the
// refusal is logged and recorded, it is not asked again, and the critical
// item starts when the slot frees.
func TestWorkerNeverInterruptsAtAnUnsafePoint(t *testing.T) {
	k, h, tw := stubbornKit(t)
	logs := k.logs.String()
	if !strings.Contains(logs, "level=WARN msg=\"preemption refused") || !strings.Contains(logs, "item=grp-a/wi-1") || !strings.Contains(logs, "for=grp-a/wi-2") {
		t.Fatalf("no WARN naming both items:\n%s", logs)
	}

	// Long after the timeout it still runs under its lease, renewed.
	// Each renewal is waited for, as the worker sees it, before the clock
	// moves on.
	for n := 2; n <= 3; n++ {
		k.fc.Advance(time.Minute)
		k.nudgeUntil("wi-1 renewed", func() bool { return len(k.item("wi-1").Lease.Renewals) >= n }, tw)
		k.waitFor("renewed expiry applied", func(s WorkerStatus) bool {
			return len(s.Running) == 1 && s.Running[0].WorkItemID == "wi-1" && s.Running[0].LeaseExpiresAt.Equal(k.item("wi-1").Lease.ExpiresAt.Time)
		}, tw)
	}
	st := tw.w.Status()
	if !runningAll("wi-1")(st) || k.state("wi-1") != protocol.WorkActive || h.cancelled.Load() != 0 || k.state("wi-2") != protocol.WorkQueued {
		t.Fatalf("after the refusal: running %+v, wi-1 %s, cancelled %d, wi-2 %s", st.Running, k.state("wi-1"), h.cancelled.Load(), k.state("wi-2"))
	}
	if len(st.Preemptions) != 1 {
		t.Fatalf("asked again after refusing: %+v", st.Preemptions)
	}
	for _, l := range k.trace() {
		if strings.HasPrefix(l, "work.failed") || strings.HasPrefix(l, "work.checkpointed") {
			t.Fatalf("the run was stopped: %s", l)
		}
	}

	close(h.release) // wi-1 finishes on its own; wi-2 takes the freed slot
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	k.until("wi-2 submitted after it", func() bool { return k.state("wi-2") == protocol.WorkSubmitted }, tw)
	k.caughtUp(tw)
	tr := strings.Join(k.trace(), "\n")
	if strings.Contains(tr, "work.checkpointed wi-1") || strings.Count(tr, "work.started wi-1") != 1 {
		t.Fatalf("wi-1 was stopped or restarted:\n%s", tr)
	}
}

// Cancellation still stops a run that refused a preemption: the lease is
// gone, the run is asked to stop, and past the hard timeout it is cancelled
// (the handler sees its context end); the slot goes to the waiting item.
func TestWorkerCancellationStopsARunThatRefusedPreemption(t *testing.T) {
	k, h, tw := stubbornKit(t)
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "no longer needed"})
	k.caughtUp(tw)
	k.fc.Advance(10 * time.Second) // the hard timeout of a lost lease
	k.nudgeUntil("handler cancelled", func() bool { return h.cancelled.Load() == 1 }, tw)
	k.waitFor("wi-2 running in the freed slot", runningAll("wi-2"), tw)
	if st := k.state("wi-1"); st != protocol.WorkCancelled {
		t.Fatalf("wi-1 %s", st)
	}
	close(h.release)
	k.until("wi-2 submitted", func() bool { return k.state("wi-2") == protocol.WorkSubmitted }, tw)
}

// nudgeUntil is until for a wait that follows a clock advance: the loop
// may have armed its timer just after the advance (relative to the new
// time), so the clock moves on by 10 ms per poll while waiting.
func (k *wkit) nudgeUntil(what string, cond func() bool, tw *testWorker) {
	k.t.Helper()
	k.until(what, func() bool {
		if cond() {
			return true
		}
		k.fc.Advance(10 * time.Millisecond)
		return false
	}, tw)
}

// A burst end to end: two critical items arrive while both slots are busy.
// Each has its own victim, both asked at the same instant (schedule asks
// for every preemption the scheduler names), both critical items start
// once their victims have checkpointed, and the victims resume and finish.
func TestWorkerPreemptsForABurstTogether(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.waitFor("both running", runningAll("wi-1", "wi-2"), tw)

	k.offer("wi-3", protocol.UrgencyCritical, "w1")
	k.offer("wi-4", protocol.UrgencyCritical, "w1")
	k.until("both accepted", func() bool {
		return k.state("wi-3") == protocol.WorkQueued && k.state("wi-4") == protocol.WorkQueued
	}, tw)
	k.fc.Advance(time.Second)
	st := k.waitFor("both critical items running", runningAll("wi-3", "wi-4"), tw)
	if len(st.Preemptions) != 2 {
		t.Fatalf("preemptions %+v, want one for each critical item", st.Preemptions)
	}
	p, q := st.Preemptions[0], st.Preemptions[1]
	if p.WorkItemID == q.WorkItemID || p.For == q.For || !p.At.Equal(q.At) {
		t.Fatalf("preemptions %+v, want two victims for two items asked at once", st.Preemptions)
	}
	for _, id := range []string{"wi-3", "wi-4", "wi-1", "wi-2"} {
		h.release(id)
	}
	k.until("all submitted", func() bool {
		for _, id := range []string{"wi-1", "wi-2", "wi-3", "wi-4"} {
			if k.state(id) != protocol.WorkSubmitted {
				return false
			}
		}
		return true
	}, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A worker that stalls past its lease expiry (its clock stands still, so
// it does not renew, and it hears nothing from the authority) loses the
// WorkItem: the coordinator re-offers it and another worker accepts it with
// a higher ownership epoch. The stalled worker's late result reaches the
// authority, is refused as stale and kept for audit only; it never
// completes the WorkItem.
func TestWorkerLeaseLostLateResultIsNotCurrent(t *testing.T) {
	k := newWKitLease(t, 30*time.Second)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	w2 := k.join("w2")
	k.member("w1")
	k.member("w2")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	epoch1 := k.item("wi-1").Ownership.OwnershipEpoch
	k.caughtUp(tw)

	// The stall: the authority's time moves past the lease, the worker's
	// does not, and the worker hears nothing.
	k.px.freeze()
	k.ac.skew.Store(int64(31 * time.Second))
	k.reoffer("wi-1", "off-wi-1-again", "w2")
	k.ok(w2, protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: "off-wi-1-again", ContractRevision: 1,
		ScheduleDisclosure: wireDisclosure(scheduler.Disclosure{}, k.ac.Now())})
	if got := k.item("wi-1"); got.Ownership.OwnerAgentID != "w2" || got.Ownership.OwnershipEpoch <= epoch1 {
		t.Fatalf("re-offer: owner %s epoch %d (was %d)", got.Ownership.OwnerAgentID, got.Ownership.OwnershipEpoch, epoch1)
	}

	// The stalled handler finishes before the worker hears of the
	// re-offer; its submission goes out late.
	h.release("wi-1")
	k.waitFor("run completed", func(s WorkerStatus) bool {
		for _, o := range s.Outcomes {
			if o.WorkItemID == "wi-1" && o.Kind == "completed" {
				return true
			}
		}
		return false
	}, tw)
	k.px.thaw()
	// The authority keeps the late result before it answers, so once the
	// worker has seen the refusal the record is there: a refusal for any
	// other reason fails here at once rather than by a wait's timeout.
	st := k.waitFor("refusal seen by the worker", func(s WorkerStatus) bool {
		for _, o := range s.Outcomes {
			if o.WorkItemID == "wi-1" && o.Sent == string(protocol.CmdWorkSubmit) && o.Err != "" {
				return true
			}
		}
		return k.state("wi-1") == protocol.WorkSubmitted
	}, tw)
	if i := hasLine(k.trace(), "work.submitted wi-1"); i >= 0 {
		t.Fatalf("a stale submission was accepted:\n%s", strings.Join(k.trace(), "\n"))
	}
	late, err := k.auth.Service.LateResults()
	if err != nil || len(late) != 1 {
		t.Fatalf("late results %+v (%v), want the one refused submission", late, err)
	}
	if l := late[0]; l.Actor.ID != "w1" || l.OwnershipEpoch != epoch1 || l.Code != protocol.CodeWorkStaleOwnership {
		t.Fatalf("late result %+v", l)
	}
	if len(st.Running) != 0 {
		t.Fatalf("still running: %+v", st.Running)
	}
	// Nothing of w1 completed the item: no work.submitted in the log, and
	// the new owner's run is what counts.
	if i := hasLine(k.trace(), "work.submitted wi-1"); i >= 0 {
		t.Fatalf("a stale submission was accepted:\n%s", strings.Join(k.trace(), "\n"))
	}
	if got := k.item("wi-1"); got.State != protocol.WorkQueued || got.Ownership.OwnerAgentID != "w2" {
		t.Fatalf("after the late result: %s owned by %s", got.State, got.Ownership.OwnerAgentID)
	}
	// The worker forgot the item: it is w2's now.
	k.caughtUp(tw)
	if st := tw.w.Status(); st.Queued != 0 || len(st.Running) != 0 {
		t.Fatalf("worker still holds the item: %+v", st)
	}
}
