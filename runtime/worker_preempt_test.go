package runtime

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

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
