package runtime

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/missionweave/mwp-worker/protocol"
)

// gathered reads one series of the worker's metrics: a gauge, or a counter
// summed over its labels.
func gathered(t *testing.T, w *Worker, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range w.Collectors() {
		reg.MustRegister(c)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return v
}

// A command whose answer has not come is awaiting, not counted; once it
// comes the count goes up and the gauge goes back to zero, so a reader that
// sees zero awaiting (the bench's settle) has every answer counted.
func TestCommandsAwaitingAnswer(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	f := &sendFault{typ: protocol.CmdWorkAcceptOffer, left: 1, hold: make(chan struct{})}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	before := gathered(t, tw.w, "mwp_worker_commands_total")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("the acceptance sent and held", func() bool { return len(f.attempts()) == 1 }, tw)
	k.until("one command awaiting", func() bool { return gathered(t, tw.w, "mwp_worker_commands_awaiting_answer") == 1 }, tw)
	if got := gathered(t, tw.w, "mwp_worker_commands_total"); got != before {
		t.Fatalf("commands counted %v while the answer is held, want %v", got, before)
	}
	close(f.hold)
	k.waitFor("accepted and running", runningAll("wi-1"), tw)
	k.until("nothing awaiting", func() bool { return gathered(t, tw.w, "mwp_worker_commands_awaiting_answer") == 0 }, tw)
	if got := gathered(t, tw.w, "mwp_worker_commands_total"); got <= before {
		t.Fatalf("commands counted %v after the answer, want more than %v", got, before)
	}
}
