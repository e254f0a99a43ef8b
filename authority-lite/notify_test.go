package authoritylite

import (
	"sync/atomic"
	"testing"

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
