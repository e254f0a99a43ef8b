package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

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
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
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
