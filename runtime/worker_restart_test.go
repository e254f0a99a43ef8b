package runtime

import (
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Stopped mid-run, the worker checkpoints at a safe point and sends the
// checkpoint; a new Worker on the same directory rebuilds its queue from
// the store, opens the next session epoch and resumes the item from its
// checkpoint.
func TestWorkerRestartResumesFromCheckpoint(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(3)
	dir := t.TempDir()
	tw := k.start(k.workerConfig("w1", dir, h, 2))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.advance("wi-1")
	k.until("step 1 reported", func() bool {
		return k.auth.Service.LastSequence("grp-a") > 0 && h.stepped("wi-1") == 1
	}, tw)

	if err := tw.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	w := k.item("wi-1")
	if w.State != protocol.WorkQueued || w.Checkpoint == nil || w.Ownership.OwnerAgentID != "w1" {
		t.Fatalf("after the drain: %s, checkpoint %v", w.State, w.Checkpoint)
	}
	if hasLine(k.trace(), "work.checkpointed wi-1 by w1 reason=preempted") < 0 {
		t.Fatalf("no checkpoint sent on shutdown")
	}

	tw2 := k.start(k.workerConfig("w1", dir, h, 2))
	if st := tw2.w.Status(); st.SessionEpoch != 2 {
		t.Fatalf("session epoch %d after restart, want 2", st.SessionEpoch)
	}
	k.waitFor("resumed", runningAll("wi-1"), tw2)
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw2)
	if got := h.history("wi-1"); !slices.Equal(got, []string{"fresh", "resumed:1"}) {
		t.Fatalf("runs %v, want a fresh run and a resume from step 1", got)
	}
	if hasLine(k.trace(), "work.started wi-1 by w1 resumed") < 0 {
		t.Fatal("the restart did not name the checkpoint in work.start")
	}
}

// Stopped while cut off, the worker pauses its run and keeps the
// checkpoint in the durable offline buffer; the next process on the same
// directory opens a new session, reconciles the buffer first, and resumes
// the item from that checkpoint.
func TestWorkerRestartWhileOfflineReconcilesBuffer(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(3)
	dir := t.TempDir()
	tw := k.start(k.workerConfig("w1", dir, h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.advance("wi-1")
	k.until("step 1", func() bool { return h.stepped("wi-1") == 1 }, tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	if err := tw.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st := tw.w.Status(); st.Buffered != 1 {
		t.Fatalf("buffered %d, want the checkpoint", st.Buffered)
	}

	k.fc.Advance(time.Second)
	k.px.restore()
	tw2 := k.start(k.workerConfig("w1", dir, h, 1))
	st := tw2.w.Status()
	if st.SessionEpoch != 2 || st.Buffered != 0 || len(st.Reconciled) != 1 || st.Reconciled[0].Outcome != "applied" {
		t.Fatalf("after restart: %+v", st)
	}
	k.waitFor("resumed", runningAll("wi-1"), tw2)
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw2)
	if got := h.history("wi-1"); !slices.Equal(got, []string{"fresh", "resumed:1"}) {
		t.Fatalf("runs %v", got)
	}
}
