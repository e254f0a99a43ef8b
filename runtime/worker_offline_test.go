package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
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
