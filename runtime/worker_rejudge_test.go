package runtime

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// An offer refused for capacity is judged again once capacity frees, while
// it is still open: the worker takes it without a restart.
func TestWorkerRejudgesCapacityRefusal(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.QueueDepth = 1
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)

	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	st := k.waitFor("wi-2 refused", func(s WorkerStatus) bool { _, ok := admissionOf(s, "wi-2"); return ok }, tw)
	if adm, _ := admissionOf(st, "wi-2"); adm.Accepted || adm.Rejection == nil || adm.Rejection.Reason != protocol.RejectCapacity {
		t.Fatalf("admission of wi-2 while full: %+v", adm)
	}

	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	k.waitFor("wi-2 taken once capacity freed", runningAll("wi-2"), tw)
	if adm, _ := admissionOf(tw.w.Status(), "wi-2"); !adm.Accepted {
		t.Fatalf("last admission of wi-2: %+v", adm)
	}
}
