package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// riskHandler runs one tool operation of the risk the test asks for,
// whenever it asks, and answers the gate's verdict (spec 11.5).
type riskHandler struct {
	asks chan riskAsk
	mu   sync.Mutex
	ran  []string // the operations whose tool function ran
}

type riskAsk struct {
	id   string
	risk slots.Risk
	err  chan error
}

func (h *riskHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h *riskHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	for {
		select {
		case <-w.PreemptRequested():
			return slots.Result{}, slots.ErrPreempted
		case <-ctx.Done():
			return slots.Result{}, ctx.Err()
		case a := <-h.asks:
			_, err := w.ToolCall(ctx, slots.Op{ID: a.id, Tool: "git", Operation: "write", Risk: a.risk},
				func(context.Context, string) ([]byte, error) {
					h.mu.Lock()
					h.ran = append(h.ran, a.id)
					h.mu.Unlock()
					return nil, nil
				})
			a.err <- err
		}
	}
}

func (h *riskHandler) didRun(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ran {
		if r == id {
			return true
		}
	}
	return false
}

// ask has the running item try an operation of risk r and returns the
// gate's answer.
func (h *riskHandler) ask(t *testing.T, id string, r slots.Risk) error {
	t.Helper()
	a := riskAsk{id: id, risk: r, err: make(chan error, 1)}
	h.asks <- a
	return <-a.err
}

// While the authority is unreachable the worker keeps its reversible work
// going but refuses every high-risk, irreversible or externally visible
// tool operation (spec 11.5) — the tool never runs — and allows them
// again once it is back online and reconciled; online, with a valid lease,
// each of them runs.
func TestWorkerOfflineRefusesRiskyOperations(t *testing.T) {
	k := newWKit(t)
	h := &riskHandler{asks: make(chan riskAsk)}
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)

	risks := []struct {
		name         string
		risk         slots.Risk
		whileOffline bool
	}{
		{"low, reversible", slots.Risk{Class: protocol.RiskLow}, true},
		{"medium, reversible", slots.Risk{Class: protocol.RiskMedium}, true},
		{"high", slots.Risk{Class: protocol.RiskHigh}, false},
		{"critical", slots.Risk{Class: protocol.RiskCritical}, false},
		{"low, irreversible", slots.Risk{Class: protocol.RiskLow, Irreversible: true}, false},
		{"low, externally visible", slots.Risk{Class: protocol.RiskLow, ExternallyVisible: true}, false},
	}
	phase := func(name string, online bool) {
		t.Helper()
		for i, r := range risks {
			id := fmt.Sprintf("%s-%d", name, i)
			err := h.ask(t, id, r.risk)
			switch allowed := online || r.whileOffline; {
			case allowed && err != nil:
				t.Fatalf("%s: %s refused: %v", name, r.name, err)
			case allowed && !h.didRun(id):
				t.Fatalf("%s: %s allowed but its tool did not run", name, r.name)
			case !allowed && err == nil:
				t.Fatalf("%s: %s operation allowed while offline (spec 11.5 forbids it without a reachable authority)", name, r.name)
			case !allowed && !errors.Is(err, errOfflineRisk):
				t.Fatalf("%s: %s refused for another reason: %v", name, r.name, err)
			case !allowed && h.didRun(id):
				t.Fatalf("%s: %s refused but its tool ran", name, r.name)
			}
		}
	}
	phase("online", true)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	phase("offline", false)
	if st := tw.w.Status(); len(st.Running) != 1 {
		t.Fatalf("the reversible run did not keep going offline: %+v", st.Running)
	}

	k.reconnect(tw)
	phase("reconnected", true)
}

// Offline, no new WorkItem starts (spec 11.5): an item accepted before
// the cut waits in its queue even when the slot frees, and starts only
// once the worker is back online and reconciled.
func TestWorkerOfflineStartsNothingNew(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.until("wi-2 accepted", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)
	k.caughtUp(tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	h.release("wi-1")
	// The turn that takes wi-1's outcome frees its slot; wi-2 would be
	// picked in that same turn.
	st := k.waitFor("wi-1 finished, its submission held", func(s WorkerStatus) bool {
		for _, o := range s.Outcomes {
			if o.WorkItemID == "wi-1" && o.Sent == "held until reconciled" {
				return true
			}
		}
		return false
	}, tw)
	for _, s := range st.Selections {
		if s.WorkItemID == "wi-2" {
			t.Fatalf("wi-2 picked while offline: %+v", st.Selections)
		}
	}
	if len(st.Running) != 0 || st.FreeSlots != 1 || st.Queued != 1 {
		t.Fatalf("offline with a free slot: running %+v, %d free, %d queued; want wi-2 waiting", st.Running, st.FreeSlots, st.Queued)
	}

	k.reconnect(tw)
	k.waitFor("wi-2 started once reconciled", runningAll("wi-2"), tw)
	k.until("wi-1's held submission sent", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
}
