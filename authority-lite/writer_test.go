package authoritylite

import (
	"errors"
	"syscall"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// After a failed write the authority refuses everything and says so on
// Failed, for its process to exit; reopening the store has every command
// acknowledged before the failure and nothing of the failed one.
func TestFailedWriteStopsAndReopenRecovers(t *testing.T) {
	k := newSvc(t)
	before := k.s.LastSequence("grp-a")
	select {
	case <-k.s.Failed():
		t.Fatal("Failed is closed before any failure")
	default:
	}
	k.s.writer.mu.Lock()
	k.s.writer.inject = func() error { return syscall.ENOSPC }
	k.s.writer.mu.Unlock()
	post := &protocol.PostMessagePayload{ConversationID: "conv-1", MessageID: "msg-1", Text: "hello"}
	_, err := k.do(k.coord, protocol.CmdMessagePost, post)
	if protocol.CodeOf(err) != protocol.CodeInternalError {
		t.Fatalf("command during the failed write: %v, want INTERNAL_ERROR", err)
	}
	select {
	case <-k.s.Failed():
	default:
		t.Fatal("Failed not closed after a failed write")
	}
	if !errors.Is(k.s.Err(), syscall.ENOSPC) {
		t.Fatalf("Err %v, want the write's", k.s.Err())
	}
	// The disk has room again; this process still refuses: its memory may
	// be ahead of the disk.
	k.s.writer.mu.Lock()
	k.s.writer.inject = nil
	k.s.writer.mu.Unlock()
	post2 := *post
	post2.MessageID = "msg-2"
	if _, err := k.do(k.coord, protocol.CmdMessagePost, &post2); protocol.CodeOf(err) != protocol.CodeInternalError {
		t.Fatalf("command after the failure: %v, want INTERNAL_ERROR", err)
	}
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	for _, p := range append([]*Principal{k.alice, k.coord}, k.w["w1"], k.w["w2"]) {
		p.s = k.s
	}
	if got := k.s.LastSequence("grp-a"); got != before {
		t.Fatalf("after reopen the log ends at %d, want %d (nothing of the failed write)", got, before)
	}
	k.ok(k.coord, protocol.CmdMessagePost, post)
	if got := k.s.LastSequence("grp-a"); got != before+1 {
		t.Fatalf("after reopen and one message the log ends at %d, want %d", got, before+1)
	}
}
