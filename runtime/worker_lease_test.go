package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/scheduler"
)

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
