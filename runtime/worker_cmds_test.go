package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// startsOf decodes the work.start commands the worker built for item id.
func startsOf(t *testing.T, f *sendFault, id string) []protocol.Command {
	t.Helper()
	var out []protocol.Command
	for _, raw := range f.attempts() {
		var c protocol.Command
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		var p protocol.StartWorkPayload
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.WorkItemID == id {
			out = append(out, c)
		}
	}
	return out
}

// Optimistic concurrency against authority-lite (spec 15.3): the worker's
// work.start names the revision its projection has. Changed meanwhile by
// someone else while the worker heard nothing, the authority answers
// REVISION_CONFLICT; the worker reads the item again and decides again:
// still its to start (an execution approval was recorded), it starts on
// the current revision; cancelled, it sends nothing more.
func TestWorkerRevisionConflict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(k *wkit)
		starts int // work.start commands built for wi-2
	}{
		{"still applies: started on the new revision", func(k *wkit) {
			k.ok(k.alice, protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-1", WorkItemID: "wi-2",
				ContractRevision: k.item("wi-2").Contract.Revision})
		}, 2},
		{"no longer applies: cancelled", func(k *wkit) {
			k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-2", Reason: "no longer needed"})
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newWKit(t)
			h := newStepHandler(1)
			f := &sendFault{typ: protocol.CmdWorkStart} // records, never faults
			tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
			k.member("w1")
			tw.w.AddGroup("grp-a")
			k.offer("wi-1", protocol.UrgencyNormal, "w1")
			k.waitFor("wi-1 running", runningAll("wi-1"), tw)
			k.offer("wi-2", protocol.UrgencyNormal, "w1")
			k.until("wi-2 queued", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)
			k.caughtUp(tw)
			seen := k.item("wi-2").Revision

			k.px.freeze()
			tc.change(k)
			h.release("wi-1") // the slot frees; wi-2's start goes out on the old revision
			k.until("wi-2 start sent", func() bool { return len(startsOf(t, f, "wi-2")) == 1 }, tw)
			k.px.thaw()
			if tc.starts == 2 {
				k.waitFor("wi-2 running", runningAll("wi-2"), tw)
			} else {
				k.waitFor("wi-2 forgotten", func(s WorkerStatus) bool { return s.Queued == 0 && len(s.Running) == 0 }, tw)
				k.caughtUp(tw)
			}
			starts := startsOf(t, f, "wi-2")
			if len(starts) != tc.starts {
				t.Fatalf("%d starts of wi-2 built, want %d", len(starts), tc.starts)
			}
			if starts[0].ExpectedRevision == nil || *starts[0].ExpectedRevision != seen {
				t.Fatalf("first start expects revision %v, want the projection's %d", starts[0].ExpectedRevision, seen)
			}
			conflicts := 0
			for _, ev := range k.events() {
				if ev.CausationID == starts[0].ActionID {
					t.Fatalf("the conflicting start was applied: %s", ev.Type)
				}
				if ev.Type == protocol.EvtWorkStarted && ev.Aggregate.ID == "wi-2" {
					conflicts++
					if ev.CausationID != starts[len(starts)-1].ActionID {
						t.Fatalf("wi-2 started by %s, want the rebuilt start", ev.CausationID)
					}
				}
			}
			if tc.starts == 2 {
				if conflicts != 1 || *starts[1].ExpectedRevision <= seen {
					t.Fatalf("%d work.started for wi-2; rebuilt start expects %d (first %d)", conflicts, *starts[1].ExpectedRevision, seen)
				}
			} else if conflicts != 0 || k.state("wi-2") != protocol.WorkCancelled {
				t.Fatalf("cancelled wi-2 started (%d) or is %s", conflicts, k.state("wi-2"))
			}
		})
	}
}

// After a conflict the command goes again only when the projection still
// calls for it: the state allows it and the offer, ownership and lease it
// names are the current ones.
func TestStillApplies(t *testing.T) {
	e := &engine{cfg: WorkerConfig{AgentID: "w1"}}
	offered := queue.Entry{State: protocol.WorkOffered, ContractRevision: 1, Offer: &queue.Offer{OfferID: "off-1", Candidates: []string{"w1"}}}
	queued := queue.Entry{State: protocol.WorkQueued, ContractRevision: 1, Owner: "w1", OwnershipEpoch: 2}
	active := queued
	active.State, active.Lease = protocol.WorkActive, &queue.Lease{LeaseID: "l-1"}
	with := func(en queue.Entry, edit func(*queue.Entry)) queue.Entry { edit(&en); return en }
	accept := &protocol.AcceptOfferPayload{OfferID: "off-1", ContractRevision: 1}
	start := &protocol.StartWorkPayload{OwnershipEpoch: 2}
	submit := &protocol.SubmitWorkPayload{OwnershipEpoch: 2, LeaseID: "l-1"}
	renew := &protocol.RenewLeasePayload{OwnershipEpoch: 2, LeaseID: "l-1"}
	release := &protocol.FailWorkPayload{OwnershipEpoch: protocol.Uint64(2)}
	for _, tc := range []struct {
		name    string
		typ     protocol.CommandType
		payload any
		en      queue.Entry
		want    bool
	}{
		{"accept: offer stands", protocol.CmdWorkAcceptOffer, accept, offered, true},
		{"accept: contract revised", protocol.CmdWorkAcceptOffer, accept, with(offered, func(e *queue.Entry) { e.ContractRevision = 2 }), false},
		{"accept: another offer", protocol.CmdWorkAcceptOffer, accept, with(offered, func(e *queue.Entry) { e.Offer = &queue.Offer{OfferID: "off-2", Candidates: []string{"w1"}} }), false},
		{"accept: renewal of an owned item", protocol.CmdWorkAcceptOffer, accept, queued, true},
		{"start: still owned", protocol.CmdWorkStart, start, queued, true},
		{"start: newer ownership", protocol.CmdWorkStart, start, with(queued, func(e *queue.Entry) { e.OwnershipEpoch = 3 }), false},
		{"start: another owner", protocol.CmdWorkStart, start, with(queued, func(e *queue.Entry) { e.Owner = "w2" }), false},
		{"start: cancelled", protocol.CmdWorkStart, start, with(queued, func(e *queue.Entry) { e.State = protocol.WorkCancelled }), false},
		{"submit: lease current", protocol.CmdWorkSubmit, submit, active, true},
		{"submit: another lease", protocol.CmdWorkSubmit, submit, with(active, func(e *queue.Entry) { e.Lease = &queue.Lease{LeaseID: "l-2"} }), false},
		{"submit: blocked", protocol.CmdWorkSubmit, submit, with(active, func(e *queue.Entry) { e.State = protocol.WorkBlocked }), false},
		{"renew: lease current", protocol.CmdLeaseRenew, renew, active, true},
		{"renew: lease gone", protocol.CmdLeaseRenew, renew, with(active, func(e *queue.Entry) { e.Lease = nil }), false},
		{"release of a queued item", protocol.CmdWorkFail, release, queued, true},
		{"release: another owner", protocol.CmdWorkFail, release, with(queued, func(e *queue.Entry) { e.Owner = "w2" }), false},
	} {
		if got := e.stillApplies(&itemCmd{typ: tc.typ, payload: tc.payload}, tc.en); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A revisioned command waits until the events of the item's own previous
// command are in the projection (so it never conflicts with itself; lc.Due
// decides, waits.txt); a command that carries no revision does not wait.
// Here: the receipt's events are what the item waits for.
func TestAwaitingOwnEvents(t *testing.T) {
	it := newItem(itemKey{"grp-a", "wi-1"}, 0, "")
	it.sentApplied(&protocol.Receipt{Events: protocol.List[protocol.EventRef]{
		{GroupID: "grp-a", Sequence: protocol.Uint64(4)}, {GroupID: "grp-a", Sequence: protocol.Uint64(5)}}})
	if it.AwaitSeq != 5 {
		t.Fatalf("awaiting %d, want 5", it.AwaitSeq)
	}
	for _, tc := range []struct {
		typ    protocol.CommandType
		cursor uint64
		want   bool
	}{{protocol.CmdWorkSubmit, 4, true}, {protocol.CmdLeaseRenew, 4, true}, {protocol.CmdArtifactPublish, 4, false}, {protocol.CmdWorkSubmit, 5, false}} {
		_, effs := lc.Step(it.core(), lc.Due{Type: tc.typ, Online: true, Membership: 1, Cursor: tc.cursor}, t0)
		if got := len(effs) == 1 && effs[0] == (lc.Wait{Why: "own-events"}); got != tc.want {
			t.Errorf("%s with the projection at %d: waits %v, want %v", tc.typ, tc.cursor, got, tc.want)
		}
	}
}

// sendFault stands between a worker and its authority: the first `left`
// commands of type typ get a fault instead of a plain answer. It keeps
// every attempt of that type as sent.
type sendFault struct {
	mu   sync.Mutex
	typ  protocol.CommandType
	left int
	// forward sends the command on before the fault (the authority
	// applies it and the answer is lost); otherwise the authority never
	// sees it and err is its answer.
	forward bool
	err     error
	// hold, when set, keeps the faulted command until it is closed, then
	// sends it as it was (a command that waited out an outage).
	hold chan struct{}
	sent [][]byte
}

func (f *sendFault) wrap(next sendFunc) sendFunc {
	return func(ctx context.Context, raw []byte) func() (*protocol.Receipt, error) {
		var c struct {
			Type protocol.CommandType `json:"type"`
		}
		_ = json.Unmarshal(raw, &c)
		f.mu.Lock()
		hit := c.Type == f.typ && f.left > 0
		if c.Type == f.typ {
			f.sent = append(f.sent, bytes.Clone(raw))
		}
		if hit {
			f.left--
		}
		f.mu.Unlock()
		if !hit {
			return next(ctx, raw)
		}
		return func() (*protocol.Receipt, error) {
			if f.hold != nil {
				select {
				case <-f.hold:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return next(ctx, raw)()
			}
			if f.forward {
				if _, err := next(ctx, raw)(); err != nil {
					return nil, err
				}
			}
			return nil, f.err
		}
	}
}

func (f *sendFault) attempts() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.sent...)
}

// startVia is start with the worker's command sender wrapped.
func (k *wkit) startVia(cfg WorkerConfig, via func(sendFunc) sendFunc) *testWorker {
	k.t.Helper()
	w, err := NewWorker(cfg)
	if err != nil {
		k.t.Fatal(err)
	}
	w.sendVia = via
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{w: w, dir: cfg.Dir, cancel: cancel, done: make(chan error, 1)}
	go func() { tw.done <- w.Run(ctx) }()
	k.t.Cleanup(func() { tw.stop(k.t) })
	k.waitFor("worker online", func(s WorkerStatus) bool { return s.Offline == "online" }, tw)
	return tw
}

// INTERNAL_ERROR and a lost answer are retryable (spec 19): the
// acceptance goes again with the same signed bytes after a back-off and the
// item is accepted, not dropped as a refused offer. Applied once and
// answered late, the resend gets the first receipt.
func TestWorkerRetriesAcceptOffer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		forward bool
		err     error
	}{
		{"internal error", false, protocol.Errorf(protocol.CodeInternalError, "injected: the authority failed")},
		{"answer lost", true, errors.New("injected: connection reset")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newWKit(t)
			h := newStepHandler(1)
			f := &sendFault{typ: protocol.CmdWorkAcceptOffer, left: 1, forward: tc.forward, err: tc.err}
			tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
			k.member("w1")
			tw.w.AddGroup("grp-a")
			k.offer("wi-1", protocol.UrgencyNormal, "w1")
			running := runningAll("wi-1")
			st := k.waitFor("accepted and running", func(s WorkerStatus) bool {
				if running(s) {
					return true
				}
				k.fc.Advance(time.Second) // past the back-off
				return false
			}, tw)
			sent := f.attempts()
			if len(sent) != 2 || !bytes.Equal(sent[0], sent[1]) {
				t.Fatalf("%d acceptances sent (equal bytes: %v), want the same bytes twice", len(sent), len(sent) == 2 && bytes.Equal(sent[0], sent[1]))
			}
			for _, r := range st.Notices {
				if r.Kind == NoticeRejection {
					t.Fatalf("a refusal was posted: %+v", r)
				}
			}
		})
	}
}

// A command that waited out an offline period past its freshness window
// is never sent stale (spec 19): the client refuses to send it and the
// worker builds the same submission again with a new actionId, issuedAt
// and signature, which the authority accepts.
func TestWorkerRebuildsStaleCommand(t *testing.T) {
	k := newWKitLease(t, time.Hour)
	h := newStepHandler(1)
	f := &sendFault{typ: protocol.CmdWorkSubmit, left: 1, hold: make(chan struct{})}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.release("wi-1")
	k.until("submission built", func() bool { return len(f.attempts()) == 1 }, tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline != "online" }, tw)
	k.fc.Advance(5 * time.Minute) // past the freshness window
	k.px.restore()
	close(f.hold) // the old bytes reach the client now
	k.until("submitted", func() bool {
		if k.state("wi-1") == protocol.WorkSubmitted {
			return true
		}
		k.fc.Advance(100 * time.Millisecond) // reconnect back-off
		return false
	}, tw)

	sent := f.attempts()
	if len(sent) != 2 {
		t.Fatalf("%d submissions built, want 2", len(sent))
	}
	var first, second protocol.Command
	if err := json.Unmarshal(sent[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sent[1], &second); err != nil {
		t.Fatal(err)
	}
	if first.ActionID == second.ActionID || !second.IssuedAt.Time.After(first.IssuedAt.Time.Add(commandFreshness)) {
		t.Fatalf("rebuilt submission %s issued %s, first %s issued %s: want a new actionId issued after the outage",
			second.ActionID, second.IssuedAt, first.ActionID, first.IssuedAt)
	}
	for _, ev := range k.events() {
		if ev.CausationID == first.ActionID {
			t.Fatalf("the stale submission reached the authority: %s", ev.Type)
		}
		if ev.Type == protocol.EvtWorkSubmitted && ev.CausationID != second.ActionID {
			t.Fatalf("work.submitted caused by %s, want the rebuilt %s", ev.CausationID, second.ActionID)
		}
	}
}

// A submission answered INTERNAL_ERROR is not a refused submission: it
// goes again, the same bytes, and the item is submitted, never failed.
func TestWorkerRetriesSubmit(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	f := &sendFault{typ: protocol.CmdWorkSubmit, left: 1, err: protocol.Errorf(protocol.CodeInternalError, "injected: the authority failed")}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.release("wi-1")
	k.until("submitted", func() bool {
		if k.state("wi-1") == protocol.WorkSubmitted {
			return true
		}
		k.fc.Advance(time.Second) // past the back-off
		return false
	}, tw)
	if sent := f.attempts(); len(sent) != 2 || !bytes.Equal(sent[0], sent[1]) {
		t.Fatalf("%d submissions sent, want the same bytes twice", len(sent))
	}
	if d := submitDecision(tw.w.Status(), "wi-1"); d != "" {
		t.Fatalf("a refusal decision %q for a retryable answer", d)
	}
}

// A refusal that names the command itself, not the intent, is answered
// with a new command (spec 19): ACTION_ID_COLLISION (the actionId is taken
// by other content), and a stale membership epoch (the Group moved on
// while the submission was out). The worker builds the same submission
// again with a new actionId and the current epoch, and the authority
// accepts it; the item is never failed for it.
func TestWorkerRebuildsAfterCollisionOrStaleEpoch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault *sendFault
		// during runs while the first submission is held.
		during func(k *wkit, tw *testWorker)
	}{
		{"action id collision", &sendFault{typ: protocol.CmdWorkSubmit, left: 1,
			err: protocol.Errorf(protocol.CodeActionIDCollision, "injected: the actionId was used with other content")}, nil},
		{"stale membership epoch", &sendFault{typ: protocol.CmdWorkSubmit, left: 1, hold: make(chan struct{})},
			func(k *wkit, tw *testWorker) {
				k.member("w1") // the membership epoch moves on
				last := k.auth.Service.LastSequence("grp-a")
				k.waitFor("the change in the worker's store", func(s WorkerStatus) bool {
					return len(s.Groups) > 0 && s.Groups[0].Cursor >= last
				}, tw)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newWKitLease(t, time.Hour)
			h := newStepHandler(1)
			f := tc.fault
			tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
			k.member("w1")
			tw.w.AddGroup("grp-a")
			k.offer("wi-1", protocol.UrgencyNormal, "w1")
			k.waitFor("running", runningAll("wi-1"), tw)
			h.release("wi-1")
			k.until("submission built", func() bool { return len(f.attempts()) >= 1 }, tw)
			if tc.during != nil {
				tc.during(k, tw)
				close(f.hold)
			}
			k.until("the submission answered again", func() bool {
				return len(f.attempts()) >= 2 || k.state("wi-1") != protocol.WorkActive
			}, tw)
			k.until("submitted", func() bool { return k.state("wi-1") != protocol.WorkActive }, tw)
			if s := k.state("wi-1"); s != protocol.WorkSubmitted {
				t.Fatalf("wi-1 %s, want submitted by the rebuilt command", s)
			}
			sent := f.attempts()
			if len(sent) != 2 {
				t.Fatalf("%d submissions built, want 2", len(sent))
			}
			var first, second protocol.Command
			if err := json.Unmarshal(sent[0], &first); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(sent[1], &second); err != nil {
				t.Fatal(err)
			}
			if first.ActionID == second.ActionID {
				t.Fatalf("rebuilt submission kept actionId %s", first.ActionID)
			}
			if tc.during != nil && *second.MembershipEpoch <= *first.MembershipEpoch {
				t.Fatalf("rebuilt submission signed with membership epoch %d, first %d", *second.MembershipEpoch, *first.MembershipEpoch)
			}
			for _, ev := range k.events() {
				if ev.Type == protocol.EvtWorkSubmitted && ev.CausationID != second.ActionID {
					t.Fatalf("work.submitted caused by %s, want the rebuilt %s", ev.CausationID, second.ActionID)
				}
			}
		})
	}
}
