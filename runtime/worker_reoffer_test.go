package runtime

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A worker's work.start reaches the authority but its answer is lost with
// the connection; while the worker is away the lease lapses and the
// coordinator re-offers the item to the same worker. On reconnect the
// worker must settle the old start first and then accept and start the
// item under the new ownership epoch, not accept it while the old run
// still holds the scheduler entry ("duplicate item id": the item would sit
// owned and never started until its start deadline passed).
func TestWorkerReofferedWhileStartUnanswered(t *testing.T) {
	k := newWKitLease(t, 30*time.Second)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-0", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-0 running", runningAll("wi-0"), tw)
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	// The grant must be in the log (the WorkItem view leads it) and in the
	// worker's store before the freeze.
	k.until("wi-1 granted to w1 in the log", func() bool { return k.count(protocol.EvtWorkOfferAccepted, "wi-1") == 1 }, tw)
	k.caughtUp(tw)

	// w1 hears nothing more: it submits wi-0 and starts wi-1 in the freed
	// slot; the authority grants the lease, the answers never arrive.
	k.px.freeze()
	h.release("wi-0")
	// The scenario needs work.start to reach the authority while its answer
	// is held back; should it ever not go out, the scenario did not happen
	// and the test says so instead of passing.
	for deadline := time.Now().Add(3 * time.Second); k.state("wi-1") != protocol.WorkActive; {
		if time.Now().After(deadline) {
			t.Skip("setup race: work.start did not reach the authority during the freeze")
		}
		k.fc.Advance(100 * time.Millisecond) // the worker's next step
		time.Sleep(5 * time.Millisecond)
	}
	epoch1 := k.item("wi-1").Ownership.OwnershipEpoch
	k.px.cut()
	k.px.thaw()                    // what was held back dies with the connection
	k.fc.Advance(31 * time.Second) // the lease lapses; w1 is cut off
	k.reoffer("wi-1", "off-wi-1-again", "w1")

	k.reconnect(tw)
	k.waitFor("wi-1 running under the new epoch", runningAll("wi-1"), tw)
	if o := k.item("wi-1").Ownership; o == nil || o.OwnerAgentID != "w1" || o.OwnershipEpoch <= epoch1 {
		t.Fatalf("wi-1 ownership %+v, want w1 above epoch %d", o, epoch1)
	}
	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
}
