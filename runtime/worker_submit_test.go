package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// submitDecision is the decision Status records about item id's refused
// submission, "" while there is none.
func submitDecision(s WorkerStatus, id string) string {
	for _, o := range s.Outcomes {
		if o.WorkItemID == id && o.Sent == string(protocol.CmdWorkSubmit) && o.Decision != "" {
			return o.Decision
		}
	}
	return ""
}

// outcomeErr is the refusal Status records for item id's submission.
func outcomeErr(s WorkerStatus, id string) string {
	for _, o := range s.Outcomes {
		if o.WorkItemID == id && o.Sent == string(protocol.CmdWorkSubmit) {
			return o.Err
		}
	}
	return ""
}

// A submission whose evidence does not cover the acceptance criteria is
// refused while the lease is still the worker's: the worker fails the run
// with the refusal as its reason, which releases the item, instead of
// leaving it active until the lease lapses.
func TestWorkerSubmitRefusedEvidenceFails(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	h.criteria = []string{"ac-1"} // ac-2 has no evidence
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	h.release("wi-1")
	k.until("failed", func() bool { return k.state("wi-1") == protocol.WorkFailed }, tw)
	st := k.waitFor("decision recorded", func(s WorkerStatus) bool { return submitDecision(s, "wi-1") != "" }, tw)
	if d := submitDecision(st, "wi-1"); d != SubmitFailed {
		t.Fatalf("decision %q, want %q", d, SubmitFailed)
	}
	var reason string
	k.until("work.failed in the log", func() bool {
		for _, ev := range k.events() {
			if ev.Type == protocol.EvtWorkFailed {
				var p struct {
					Reason string `json:"reason"`
				}
				_ = json.Unmarshal(ev.Payload, &p)
				reason = p.Reason
				return true
			}
		}
		return false
	}, tw)
	if !strings.Contains(reason, "submission refused") || !strings.Contains(reason, string(protocol.CodeInvalidCommand)) {
		t.Fatalf("failure reason %q, want the submission's refusal", reason)
	}
}

// A submission refused because the worker's lease is gone (the item was
// cancelled while the worker heard nothing) stops there: the result is
// late, nothing more is sent for the run, and Status says why.
func TestWorkerSubmitRefusedLeaseLostStops(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	f := &sendFault{typ: protocol.CmdArtifactPublish} // records, never faults
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	k.caughtUp(tw)
	k.px.freeze()
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "no longer needed"})
	h.release("wi-1")
	// Commands go out one at a time: the submission follows the publish.
	k.until("publish sent", func() bool { return len(f.attempts()) == 1 }, tw)
	k.px.thaw()
	st := k.waitFor("decision recorded", func(s WorkerStatus) bool { return submitDecision(s, "wi-1") != "" }, tw)
	// The refusal and the cancellation's events come back on separate
	// lanes after the thaw: the refusal decided first is "lease lost", the
	// events first "moved on" (TestWorkerSubmitConflictMovesOn's case).
	// Either way the run stops and says why.
	if d := submitDecision(st, "wi-1"); d != SubmitLeaseLost && d != SubmitMovedOn {
		t.Fatalf("decision %q, want %q (or %q)", d, SubmitLeaseLost, SubmitMovedOn)
	}
	k.caughtUp(tw)
	for _, l := range k.trace() {
		if strings.HasPrefix(l, "work.failed") || strings.HasPrefix(l, "work.submitted") {
			t.Fatalf("the late run sent more: %v", k.trace())
		}
	}
	if s := k.state("wi-1"); s != protocol.WorkCancelled {
		t.Fatalf("wi-1 %s, want cancelled", s)
	}
}

// A submission that conflicts with a change the worker has not yet seen
// (the item was cancelled) is decided again on the current projection:
// it no longer applies, the item has moved on, and nothing more is sent.
func TestWorkerSubmitConflictMovesOn(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	// The publish is answered at once without reaching the authority, so
	// the submission goes out while the worker still hears nothing.
	f := &sendFault{typ: protocol.CmdArtifactPublish, left: 1}
	sub := &sendFault{typ: protocol.CmdWorkSubmit} // records, never faults
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), func(next sendFunc) sendFunc { return f.wrap(sub.wrap(next)) })
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	k.caughtUp(tw)
	k.px.freeze()
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "no longer needed"})
	h.release("wi-1")
	k.until("submission sent", func() bool { return len(sub.attempts()) == 1 }, tw)
	k.px.thaw()
	st := k.waitFor("decision recorded", func(s WorkerStatus) bool { return submitDecision(s, "wi-1") != "" }, tw)
	if d := submitDecision(st, "wi-1"); d != SubmitMovedOn || !strings.Contains(outcomeErr(st, "wi-1"), string(protocol.CodeRevisionConflict)) {
		t.Fatalf("decision %q on %q, want %q on a revision conflict", d, outcomeErr(st, "wi-1"), SubmitMovedOn)
	}
	if n := len(sub.attempts()); n != 1 {
		t.Fatalf("%d submissions sent, want the one that conflicted", n)
	}
	k.caughtUp(tw)
	for _, l := range k.trace() {
		if strings.HasPrefix(l, "work.failed") || strings.HasPrefix(l, "work.submitted") {
			t.Fatalf("the cancelled run sent more: %v", k.trace())
		}
	}
}

// A refusal received over the wire carries its JSON pointer in its
// details; the worker's log line and work.fail reason name it.
func TestRefusalTextNamesThePointer(t *testing.T) {
	wire := &protocol.Error{Code: protocol.CodeSchemaValidationFailed, Message: "string must not be empty",
		Details: map[string]any{"pointer": "/payload/progress/nextCheckpoint"}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{wire, "SCHEMA_VALIDATION_FAILED: /payload/progress/nextCheckpoint: string must not be empty"},
		{protocol.Errorf(protocol.CodeInvalidCommand, "bad").At("/payload/x"), "INVALID_COMMAND: /payload/x: bad"},
		{protocol.Errorf(protocol.CodeInvalidCommand, "bad"), "INVALID_COMMAND: bad"},
	} {
		if got := refusalText(c.err); got != c.want {
			t.Errorf("refusalText = %q, want %q", got, c.want)
		}
	}
	if wire.Pointer != "" {
		t.Error("refusalText changed the error it was given")
	}
}
