package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/slots"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

// failFirst fails its first attempt and then runs as stepHandler does,
// keeping the attempt number each run saw. The first attempt fails once
// hold is closed.
type failFirst struct {
	*stepHandler
	hold chan struct{}
	mu   sync.Mutex
	seen []uint64
}

func (h *failFirst) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	h.mu.Lock()
	h.seen = append(h.seen, w.Attempt())
	first := len(h.seen) == 1
	h.mu.Unlock()
	if first {
		select {
		case <-h.hold:
		case <-ctx.Done():
		}
		return slots.Result{}, errors.New("flaky tool: exit status 1")
	}
	return h.stepHandler.Run(ctx, w)
}

func (h *failFirst) attempts() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.seen...)
}

// A handler's first run is attempt 1, and a failed attempt the retry
// policy runs again leaves a WARN line with its error and a retry count,
// though nothing of it reaches the authority's log.
func TestWorkerRetryIsVisibleAndCountsFromOne(t *testing.T) {
	k := newWKit(t)
	h := &failFirst{stepHandler: newStepHandler(1), hold: make(chan struct{})}
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	var told []slots.Retry
	cfg.OnRetry = func(r slots.Retry) { told = append(told, r) } // one run: one goroutine
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	c := contractFor("wi-1", protocol.UrgencyNormal, k.ac.Now())
	c.RetryPolicy.MaxAttempts = 2 // one failure, one retry: the second attempt is the last
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
	k.reoffer("wi-1", "off-wi-1", "w1")
	k.waitFor("the first attempt", func(s WorkerStatus) bool {
		run := runningOf(s, "wi-1")
		return run != nil && run.Attempt == 1
	}, tw)
	close(h.hold)
	k.nudgeUntil("the second attempt", func() bool { return len(h.attempts()) == 2 }, tw)
	// The second attempt waits for release: status shows it running.
	if run := runningOf(tw.w.Status(), "wi-1"); run == nil || run.Attempt != 2 {
		t.Fatalf("status while the second attempt runs: %+v, want attempt 2", run)
	}
	if len(told) != 1 || told[0].Attempt != 1 || told[0].Slot.WorkItemID != "wi-1" || told[0].Err == nil {
		t.Fatalf("OnRetry told %+v, want attempt 1 of wi-1 with its error", told)
	}
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if got := h.attempts(); got[0] != 1 || got[1] != 2 {
		t.Fatalf("attempts the handler saw: %v, want [1 2]", got)
	}
	if got := gathered(t, tw.w, "mwp_worker_run_retries_total", map[string]string{"capability": "code.implement"}); got != 1 {
		t.Fatalf("retries counted: %v, want 1", got)
	}
	var warned bool
	for _, l := range strings.Split(k.logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "attempt failed; retrying") &&
			strings.Contains(l, "attempt=1") && strings.Contains(l, "flaky tool: exit status 1") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no WARN line for the failed attempt:\n%s", k.logs.String())
	}
}

func runningOf(st WorkerStatus, id string) *RunStatus {
	for i := range st.Running {
		if st.Running[i].WorkItemID == id {
			return &st.Running[i]
		}
	}
	return nil
}
