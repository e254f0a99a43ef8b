package authoritylite

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// OnChange fires once per registration, after the next append (at once
// when the log is already past), never after cancel, and keeps nothing
// registered once fired or cancelled.
func TestServiceOnChange(t *testing.T) {
	k := newSvc(t)
	last := k.s.LastSequence("grp-a")
	var fired, cancelled, past atomic.Int32
	k.s.OnChange("grp-a", last, func() { fired.Add(1) })
	stop := k.s.OnChange("grp-a", last, func() { cancelled.Add(1) })
	k.s.OnChange("grp-a", last-1, func() { past.Add(1) })
	if fired.Load() != 0 || past.Load() != 1 {
		t.Fatalf("before an append: fired %d, past %d; want 0 and 1", fired.Load(), past.Load())
	}
	stop()
	k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m", ConversationID: "c", Text: "x"})
	k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m2", ConversationID: "c", Text: "y"})
	if fired.Load() != 1 || cancelled.Load() != 0 || past.Load() != 1 {
		t.Fatalf("after two appends: fired %d, cancelled %d, past %d; want 1, 0, 1", fired.Load(), cancelled.Load(), past.Load())
	}
	gs := k.s.group("grp-a")
	gs.nmu.Lock()
	n := len(gs.waiters)
	gs.nmu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
}

// TestPurgeWakesWaiters: a stream waiting on a Group that is purged is
// woken (it then reads GROUP_NOT_FOUND and ends) and nothing stays
// registered: a waiter left behind holds the deleted Group's state,
// its event tail among it, for as long as its connection lasts.
func TestPurgeWakesWaiters(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	if err := k.s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
		ArchiveAfter: time.Minute, RetainEvents: 1000, PurgeAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k.rebind(s)
	ctx := context.Background()
	k.clk.Advance(2 * time.Minute)
	if k.s.ArchiveDue(ctx); !k.s.Released("grp-a") {
		t.Fatal("not archived")
	}
	gs := k.s.peekGroup("grp-a")
	var fired atomic.Int32
	k.s.OnChange("grp-a", k.s.LastSequence("grp-a"), func() { fired.Add(1) })
	k.clk.Advance(3 * time.Hour)
	if k.s.ArchiveDue(ctx); !k.s.Purged("grp-a") {
		t.Fatal("not purged")
	}
	gs.nmu.Lock()
	n := len(gs.waiters)
	gs.nmu.Unlock()
	if fired.Load() != 1 || n != 0 {
		t.Fatalf("after the purge: fired %d, %d waiters left; want 1 and 0", fired.Load(), n)
	}
	if _, err := k.s.Events("grp-a", 0, 0); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("events of a purged Group: %v", err)
	}
}

// Closed (wss.Closer) tells an archived Group's last sequence, so its
// streams end once they sent it; an active Group is not closed.
func TestClosedOnceArchived(t *testing.T) {
	k := newSvc(t)
	if last, ok := k.s.Closed("grp-a"); ok {
		t.Fatalf("an active Group closed at %d", last)
	}
	a, _ := archivedSvc(t)
	last, ok := a.s.Closed("grp-a")
	if want := a.s.LastSequence("grp-a"); !ok || last != want || want == 0 {
		t.Fatalf("archived Group: closed %v at %d, want at its last sequence %d", ok, last, want)
	}
}
