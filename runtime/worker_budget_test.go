package runtime

import (
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// The running worker holds each accepted item's expected cost against its
// limits: with room for one side effect, a second offer is refused naming
// the dimension, and taken once the first item's commitment has ended.
func TestWorkerAdmissionBudgetLimit(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 2)
	cfg.Costs = map[string]protocol.Budgets{"code.implement": {SideEffects: protocol.Uint64(1)}}
	cfg.Limits = protocol.Budgets{SideEffects: protocol.Uint64(1)}
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	// Wait for the decision, whichever it is, so an acceptance fails here
	// at once rather than by the wait's timeout.
	st := k.waitFor("wi-2 judged", func(s WorkerStatus) bool { _, ok := admissionOf(s, "wi-2"); return ok }, tw)
	if a, _ := admissionOf(st, "wi-2"); a.Accepted || a.Rejection == nil || a.Rejection.Reason != protocol.RejectBudget || !strings.HasPrefix(a.Rejection.Detail, "sideEffects") {
		t.Fatalf("admission of wi-2 %+v, want refused for budget naming sideEffects", a)
	}
	if s := k.state("wi-2"); s != protocol.WorkOffered {
		t.Fatalf("wi-2 %s, want still offered", s)
	}
	h.release("wi-1")
	k.waitFor("wi-2 taken once wi-1 ended", runningAll("wi-2"), tw)
}
