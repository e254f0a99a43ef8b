package authoritylite

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// parkedIn reports whether some goroutine is blocked on a channel receive
// inside fn: a wait the test can see without waiting for a fixed time.
func parkedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "[chan receive") && strings.Contains(s, fn) {
			return true
		}
	}
	return false
}

// A second command under an actionId whose first command is decided but
// not yet durable is ACTION_ID_COLLISION at once when its content differs
// (spec 19): it neither waits for the first's commit nor is answered with
// the first's receipt, which would tell its sender that other content was
// applied under its actionId.
func TestCollisionWhileTheFirstIsInFlight(t *testing.T) {
	k := newSvc(t)
	fixed := func(e *protocol.Envelope) { e.ActionID = "act-in-flight" }
	_, first, err := k.coord.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-first", Text: "first"}, fixed)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := k.coord.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-other", Text: "other content"}, fixed)
	if err != nil {
		t.Fatal(err)
	}
	entered, free := holdNextCommit(k.s.writer)
	defer free(nil)
	type answer struct {
		r   *protocol.Receipt
		err error
	}
	firstDone, otherDone := make(chan answer, 1), make(chan answer, 1)
	go func() { r, err := k.s.Submit(context.Background(), "", first); firstDone <- answer{r, err} }()
	<-entered // the first is decided, its commit held in the writer
	go func() { r, err := k.s.Submit(context.Background(), "", other); otherDone <- answer{r, err} }()

	// Answered, or parked waiting for the first's commit: only then is
	// the commit let go, so the answer below is the one given in flight.
	var got answer
	answered := false
	for deadline := time.Now().Add(15 * time.Second); !answered; {
		select {
		case got = <-otherDone:
			answered = true
			continue
		default:
		}
		if parkedIn("(*Service).checkActionID") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second command was neither answered nor waiting")
		}
		time.Sleep(2 * time.Millisecond) // poll
	}
	free(nil)
	if !answered {
		got = <-otherDone
	}
	if a := <-firstDone; a.err != nil {
		t.Fatalf("first command: %v", a.err)
	}
	if protocol.CodeOf(got.err) != protocol.CodeActionIDCollision {
		t.Fatalf("other content under an actionId in flight: receipt %+v, err %v; want ACTION_ID_COLLISION", got.r, got.err)
	}
	if !answered {
		t.Fatal("the collision waited for the first command's commit")
	}
}

// A reconciliation the state machine refuses after its usage was charged
// leaves nothing behind (spec 11.5: usage, charge and progress are one
// decision): the WorkItem's usage, its revision and the log are as before,
// and the same command applied later charges its usage once. No command
// reaches such a refusal today — every reason the live lease.renew could be
// refused for is checked before the charge, and a Mission leaves active
// only with its WorkItems closed — so the Mission is set out of active in
// memory, standing for a rule of the state machine that refuses after the
// charge.
func TestReconcileRefusedAfterTheChargeLeavesNoCharge(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	disc := k.clk.Now().Add(10 * time.Second)
	raw := k.buffered(w, disc, 20*time.Second, protocol.Usage{Tokens: 10})
	k.clk.Advance(40 * time.Second) // the lease is still current: the live path
	gs := k.s.group("grp-a")
	setMission := func(s protocol.MissionState) {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		gs.g.Mission.State = s
	}
	last, before := k.s.LastSequence("grp-a"), k.item("wi-1")
	setMission(protocol.MissionAwaitingApproval)
	_, err := k.submitRaw(raw)
	setMission(protocol.MissionActive)
	if protocol.CodeOf(err) != protocol.CodeInvalidStateTransition {
		t.Fatalf("got %v, want the state machine's INVALID_STATE_TRANSITION", err)
	}
	if u := k.s.Usage("grp-a", "wi-1"); !u.IsZero() {
		t.Fatalf("usage %+v after the refusal, want none", u)
	}
	if after := k.item("wi-1"); after.Revision != before.Revision || k.s.LastSequence("grp-a") != last {
		t.Fatalf("the refusal left a trace: revision %d -> %d, log %d -> %d", before.Revision, after.Revision, last, k.s.LastSequence("grp-a"))
	}
	if _, err := k.submitRaw(raw); err != nil {
		t.Fatalf("the same command once the Mission is active: %v", err)
	}
	if u := k.s.Usage("grp-a", "wi-1"); u.Tokens != 10 {
		t.Fatalf("usage %+v, want the 10 tokens charged once", u)
	}
}
