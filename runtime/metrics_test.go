package runtime

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// gathered sums the series of one of the worker's metrics whose labels
// include every pair in match.
func gathered(t *testing.T, w *Worker, name string, match map[string]string) float64 {
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
	series:
		for _, m := range f.Metric {
			n := 0
			for _, l := range m.Label {
				if want, ok := match[l.GetName()]; ok {
					if l.GetValue() != want {
						continue series
					}
					n++
				}
			}
			if n == len(match) {
				v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
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
	accepted := map[string]string{"type": protocol.MetricLabel(protocol.CmdWorkAcceptOffer), "result": "accepted"}
	awaiting := func() float64 { return gathered(t, tw.w, "mwp_worker_commands_awaiting_answer", nil) }
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("the acceptance sent and held", func() bool { return len(f.attempts()) == 1 }, tw)
	k.until("the acceptance awaiting", func() bool { return awaiting() >= 1 }, tw)
	if got := gathered(t, tw.w, "mwp_worker_commands_total", accepted); got != 0 {
		t.Fatalf("%v acceptances counted while the answer is held, want 0", got)
	}
	close(f.hold)
	k.waitFor("accepted and running", runningAll("wi-1"), tw)
	k.until("nothing awaiting", func() bool { return awaiting() == 0 }, tw)
	if got := gathered(t, tw.w, "mwp_worker_commands_total", accepted); got != 1 {
		t.Fatalf("%v acceptances counted after the answer, want 1", got)
	}
}

// An applied event the view could not interpret is counted apart from the
// applied ones, so an operator sees a worker ignoring part of its log.
func TestUninterpretedEventsCounted(t *testing.T) {
	m := newMetrics()
	m.applied(queue.Result{
		Applied:  []queue.Ref{{GroupID: "grp-a", EventID: "e1", Sequence: 1}, {GroupID: "grp-a", EventID: "e2", Sequence: 2}},
		Problems: []queue.Problem{{Ref: queue.Ref{GroupID: "grp-a", EventID: "e2", Sequence: 2}, Err: protocol.Errorf(protocol.CodeInvalidCommand, "unknown WorkItem")}},
	})
	if got := counterValue(t, m.uninterpreted); got != 1 {
		t.Fatalf("uninterpreted events counted: %v, want 1", got)
	}
	if got := counterValue(t, m.events.WithLabelValues("applied")); got != 2 {
		t.Fatalf("applied events counted: %v, want 2", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
