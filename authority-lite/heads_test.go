package authoritylite

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// Head is every sequence the Group decided (what the binding refuses a
// position past), and CURSOR_TOO_OLD names the first sequence still online
// (details.firstSequence), so a client whose overlap below its cursor was
// compacted away asks again from there.
func TestHeadAndFirstOnline(t *testing.T) {
	k := newSvc(t)
	if _, ok := k.s.Head("grp-none"); ok {
		t.Fatal("a Head for a Group that does not exist")
	}
	k.toActive("wi-1")
	for _, id := range []string{"m1", "m2", "m3"} {
		k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"})
	}
	last := k.s.LastSequence("grp-a")
	if h, ok := k.s.Head("grp-a"); !ok || h != last {
		t.Fatalf("Head = %d %v, want %d", h, ok, last)
	}
	if _, err := k.s.Compact("grp-a", 2); err != nil {
		t.Fatal(err)
	}
	_, err := k.s.Events("grp-a", 0, 10)
	pe, ok := err.(*protocol.Error)
	if !ok || pe.Code != protocol.CodeCursorTooOld || pe.Details["firstSequence"] != last-1 {
		t.Fatalf("CURSOR_TOO_OLD %+v, want firstSequence %d", err, last-1)
	}
	if evs, err := k.s.Events("grp-a", last-2, 0); err != nil || evs[0].Sequence != last-1 {
		t.Fatalf("the first online event is not %d: %v", last-1, err)
	}
}
