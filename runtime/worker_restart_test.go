package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	bolt "go.etcd.io/bbolt"
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

// A worker that was down while its Group grew and was compacted past its
// cursor (retention) restores the snapshot CURSOR_TOO_OLD names, read from
// the authority's store, and follows the Group on from it; before, the
// Group was rejected and its cursor stayed behind for good.
func TestWorkerRestoresCompactedGroup(t *testing.T) {
	k := newWKit(t)
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	if err := k.start(cfg).stop(t); err != nil { // enrolled by a first run
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	k.until("grp-a followed", func() bool { return tw.w.liveStore().Cursor("grp-a") > 0 }, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the Group grows while the worker is down
		id := fmt.Sprintf("w-other-%d", i)
		k.join(id)
		k.member(id)
	}
	ref, err := k.auth.Service.Compact("grp-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	tw = k.start(cfg)
	k.until(fmt.Sprintf("grp-a restored at %d and followed on", ref.Sequence), func() bool {
		return tw.w.liveStore().Cursor("grp-a") > ref.Sequence
	}, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
}

// An item's estimate is the longest observed mean of its capabilities,
// resting on the fewest runs among them; while one capability has none,
// the configured guess, resting on none. The scheduler gets both, except
// the guess: for an item resting on no run it charges the Group's observed
// mean instead (its own default being the same configured guess).
func TestEstimateOf(t *testing.T) {
	e := &engine{cfg: WorkerConfig{Estimate: time.Minute}, runs: map[string]runStats{}}
	var impl, review runStats
	impl.add(8 * time.Minute)
	impl.add(12 * time.Minute)
	review.add(3 * time.Minute)
	e.runs["code.implement"], e.runs["code.review"] = impl, review
	caps := func(ids ...string) queue.Entry {
		var en queue.Entry
		for _, id := range ids {
			en.Capabilities = append(en.Capabilities, protocol.Capability{ID: id, Version: "1.x"})
		}
		return en
	}
	for _, tc := range []struct {
		name string
		en   queue.Entry
		est  time.Duration
		runs int
	}{
		{"observed", caps("code.implement"), 10 * time.Minute, 2},
		{"two observed: the longer, the fewer runs", caps("code.implement", "code.review"), 10 * time.Minute, 1},
		{"one never run: the guess", caps("code.implement", "code.deploy"), time.Minute, 0},
		{"no capability: the guess", caps(), time.Minute, 0},
	} {
		est, runs := e.estimateOf(tc.en)
		if est != tc.est || runs != tc.runs {
			t.Errorf("%s: %v on %d runs, want %v on %d", tc.name, est, runs, tc.est, tc.runs)
		}
		want := tc.est
		if tc.runs == 0 {
			want = 0
		}
		if si := e.schedItem(itemKey{"grp-a", "wi-1"}, tc.en, false); si.Estimate != want || si.Observed != tc.runs {
			t.Errorf("%s: scheduler item estimate %v on %d runs", tc.name, si.Estimate, si.Observed)
		}
	}
}

// What a worker observed of its runs survives its restart (the store's
// observed/ bucket): the first item offered after it is disclosed with the
// 10 minutes its capability's run took before, not the configured guess.
func TestWorkerObservationsSurviveRestart(t *testing.T) {
	k := newWKitLease(t, time.Hour)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Estimate = time.Minute
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.fc.Advance(10 * time.Minute)
	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}

	tw2 := k.start(cfg)
	tw2.w.AddGroup("grp-a")
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	var d *protocol.ScheduleDisclosure
	k.until("acceptance of wi-2", func() bool { d = acceptedDisclosure(t, k, "grp-a", "wi-2"); return d != nil }, tw2)
	if got := d.EstimatedCompletion.Time.Sub(d.EstimatedStartWindow.To.Time); got != 10*time.Minute || d.Confidence <= 0 {
		t.Fatalf("disclosure after the restart %+v (run %v): want the observed 10 minutes and a confidence", d, got)
	}
}

// acceptedDisclosure is the schedule disclosure of item id's acceptance in
// the Group's log, or nil.
func acceptedDisclosure(t *testing.T, k *wkit, groupID, id string) *protocol.ScheduleDisclosure {
	t.Helper()
	evs, err := k.auth.Service.Events(groupID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, se := range evs {
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			t.Fatal(err)
		}
		var p struct {
			WorkItemID         string                       `json:"workItemId"`
			ScheduleDisclosure *protocol.ScheduleDisclosure `json:"scheduleDisclosure"`
		}
		if ev.Type == protocol.EvtWorkOfferAccepted && json.Unmarshal(ev.Payload, &p) == nil && p.WorkItemID == id && p.ScheduleDisclosure != nil {
			return p.ScheduleDisclosure
		}
	}
	return nil
}

// The records read back as written; one that does not decode, or that is
// negative, is skipped rather than failing the worker's start.
func TestObservedRecords(t *testing.T) {
	st, err := queue.Open(t.TempDir(), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := st.DB()
	runs := map[string]runStats{"code.implement": {n: 3, mean: 7 * time.Minute}, "code.review": {n: 1, mean: time.Second}}
	if err := saveObserved(db, runs, runStats{n: 5, mean: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	gotRuns, gotStart, err := loadObserved(db)
	if err != nil || len(gotRuns) != 2 || gotRuns["code.implement"] != runs["code.implement"] || gotRuns["code.review"] != runs["code.review"] ||
		gotStart != (runStats{n: 5, mean: 40 * time.Millisecond}) {
		t.Fatalf("loaded %v %v %v", gotRuns, gotStart, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bktObserved).Bucket(bktRuns)
		if err := rb.Put([]byte("code.review"), []byte("{not json")); err != nil {
			return err
		}
		return rb.Put([]byte("code.test"), []byte(`{"n":2,"meanNs":-5}`))
	}); err != nil {
		t.Fatal(err)
	}
	gotRuns, _, err = loadObserved(db)
	if err != nil || len(gotRuns) != 1 || gotRuns["code.implement"] != runs["code.implement"] {
		t.Fatalf("with damaged records: %v %v", gotRuns, err)
	}
}

// Past meanWindow runs a new run moves the mean by 1/meanWindow of its
// difference, so an estimate follows a capability whose runs change.
func TestRunStatsWindow(t *testing.T) {
	var r runStats
	for range meanWindow {
		r.add(time.Minute)
	}
	r.add(time.Minute + meanWindow*time.Second)
	if r.mean != time.Minute+time.Second || r.n != meanWindow+1 {
		t.Fatalf("mean %v on %d runs", r.mean, r.n)
	}
}
