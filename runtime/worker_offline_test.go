package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// reconnect waits for the worker to see the cut the test made (an "online"
// read before that is stale), restores the network and steps the clock
// (the client's backoff runs on it) until the worker is online again.
func (k *wkit) reconnect(tw *testWorker) {
	k.t.Helper()
	k.waitFor("the cut seen", func(s WorkerStatus) bool { return s.Offline != "online" }, tw)
	k.px.restore()
	k.until("reconnected", func() bool {
		st := tw.w.Status()
		if st.Offline == "online" {
			return true
		}
		// Only while the client waits out its backoff: advancing the
		// shared clock while it dials or reconciles moves the authority's
		// time too, by however long a loaded machine takes, and can push
		// buffered progress past its grace window.
		if st.Connection == "disconnected" {
			k.fc.Advance(50 * time.Millisecond)
		}
		return false
	}, tw)
}

func (k *wkit) count(typ protocol.EventType, item string) int {
	n := 0
	for _, ev := range k.events() {
		if ev.Type == typ && ev.Aggregate != nil && ev.Aggregate.ID == item {
			n++
		}
	}
	return n
}

// Cut off mid-work, the worker keeps its reversible work running, buffers
// its progress signed with the offline binding, and on reconnect within
// the grace period reconciles: the progress lands, the offline usage is
// charged exactly once, and normal operation (renewal, submission) resumes.
func TestWorkerDisconnectWithinGraceReconciles(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	progressed := k.count(protocol.EvtWorkProgressed, "wi-1")

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	// Past half the lease: the renewal is buffered, not sent.
	k.fc.Advance(61 * time.Second)
	st := k.waitFor("progress buffered", func(s WorkerStatus) bool { return s.Buffered == 1 }, tw)
	if len(st.Running) != 1 {
		t.Fatalf("the reversible run did not keep going offline: %+v", st.Running)
	}
	// Nothing new may start while offline.
	k.offer("wi-2", protocol.UrgencyNormal, "w1")

	k.reconnect(tw)
	st = k.waitFor("buffer reconciled", func(s WorkerStatus) bool { return s.Buffered == 0 && len(s.Reconciled) == 1 }, tw)
	if r := st.Reconciled[0]; r.Outcome != "applied" || r.Type != string(protocol.CmdLeaseRenew) {
		t.Fatalf("reconciled %+v", r)
	}
	if got := k.count(protocol.EvtWorkProgressed, "wi-1"); got != progressed+1 {
		t.Fatalf("%d work.progressed after reconnect, want %d:\n%s", got, progressed+1, strings.Join(k.trace(), "\n"))
	}
	if n := k.count(protocol.EvtResourceUsageRecorded, "wi-1"); n != 1 {
		t.Fatalf("%d usage records, want 1", n)
	}
	if u := k.auth.Service.Usage("grp-a", "wi-1"); u.WallClockSeconds < 61 || u.WallClockSeconds > 62 {
		t.Fatalf("usage %+v, want ~61 wall-clock seconds", u)
	}
	// The buffered renewal applied on the live lease: it was extended.
	if l := k.item("wi-1").Lease; len(l.Renewals) != 1 {
		t.Fatalf("lease %+v", l)
	}

	// A second disconnect and reconnect charges nothing again.
	k.px.cut()
	k.waitFor("offline again", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	k.reconnect(tw)
	k.waitFor("both running after reconcile", runningAll("wi-1", "wi-2"), tw)
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if n := k.count(protocol.EvtResourceUsageRecorded, "wi-1"); n != 1 {
		t.Fatalf("%d usage records after a second reconnect, want 1", n)
	}
}

// Offline past what the grace allows: the run is paused at a safe point
// before its grace deadline, its checkpoint buffered with the binding; on
// reconnect the buffered progress and checkpoint are reconciled in order
// (historically: the lease had expired), and when the coordinator offers
// the item again it resumes from that checkpoint.
func TestWorkerOfflinePausesBeforeGraceDeadline(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.OfflineGrace = 30 * time.Second
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.advance("wi-1")
	k.until("step 1", func() bool { return h.stepped("wi-1") == 1 }, tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	// Lease 2 min + grace 30 s: the pause comes two ticks before 2m30s.
	k.fc.Advance(61 * time.Second)
	k.waitFor("progress buffered", func(s WorkerStatus) bool { return s.Buffered == 1 }, tw)
	k.fc.Advance(60 * time.Second)
	st := k.waitFor("still running within the lease", func(s WorkerStatus) bool { return len(s.Running) == 1 }, tw)
	if len(st.Preemptions) != 0 {
		t.Fatalf("paused too early: %+v", st.Preemptions)
	}
	k.fc.Advance(27 * time.Second)
	st = k.waitFor("paused with its checkpoint buffered", func(s WorkerStatus) bool {
		return len(s.Running) == 0 && s.Buffered >= 2
	}, tw)
	if p := st.Preemptions[len(st.Preemptions)-1]; p.Reason != "offline-grace" || p.WorkItemID != "wi-1" {
		t.Fatalf("preemptions %+v", st.Preemptions)
	}

	k.reconnect(tw)
	st = k.waitFor("reconciled", func(s WorkerStatus) bool { return s.Buffered == 0 && len(s.Reconciled) >= 2 }, tw)
	for _, r := range st.Reconciled {
		if r.Outcome != "applied" {
			t.Fatalf("reconciled %+v\n%s", st.Reconciled, strings.Join(k.trace(), "\n"))
		}
	}
	if hasLine(k.trace(), "work.checkpointed wi-1 by w1 reason=preempted") < 0 {
		t.Fatalf("buffered checkpoint not applied:\n%s", strings.Join(k.trace(), "\n"))
	}
	// The lease ran out offline: the checkpoint is recorded as a
	// historical fact and the item waits for the coordinator, who offers it
	// again; the new ownership resumes from the checkpoint.
	if w := k.item("wi-1"); w.State != protocol.WorkActive || w.Checkpoint == nil {
		t.Fatalf("authority: %s checkpoint %v", w.State, w.Checkpoint)
	}
	k.reoffer("wi-1", "off-wi-1-again", "w1")
	k.waitFor("resumed", runningAll("wi-1"), tw)
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if got := h.history("wi-1"); len(got) != 2 || got[1] != "resumed:1" {
		t.Fatalf("runs %v", got)
	}
}

// At the offline buffer's bound the run is paused at a safe point rather
// than dropping progress; its checkpoint waits in memory and goes out
// after the buffered commands are reconciled.
func TestWorkerOfflineBufferFullPauses(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.OfflineLimits.MaxCommands = 1
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	k.fc.Advance(61 * time.Second)
	k.waitFor("buffer full", func(s WorkerStatus) bool { return s.Buffered == 1 }, tw)
	k.fc.Advance(11 * time.Second) // the next progress report finds it full
	st := k.waitFor("paused", func(s WorkerStatus) bool { return len(s.Running) == 0 }, tw)
	if p := st.Preemptions[len(st.Preemptions)-1]; p.Reason != "offline-buffer-full" {
		t.Fatalf("preemptions %+v", st.Preemptions)
	}
	if st.Buffered != 1 {
		t.Fatalf("buffered %d, want the bound 1", st.Buffered)
	}

	k.reconnect(tw)
	k.waitFor("resumed after the checkpoint went out", runningAll("wi-1"), tw)
	if hasLine(k.trace(), "work.checkpointed wi-1 by w1 reason=preempted") < 0 {
		t.Fatalf("no checkpoint:\n%s", strings.Join(k.trace(), "\n"))
	}
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if got := h.history("wi-1"); len(got) != 2 || got[1] != "resumed:0" {
		t.Fatalf("runs %v", got)
	}
}

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
