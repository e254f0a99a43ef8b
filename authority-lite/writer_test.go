package authoritylite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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

// A receipt is handed out only once its batch is committed: while the
// writer is held inside the commit, neither the command nor a retry of it
// gets an answer and the store has no receipt; after the commit the
// command and the retry get the same receipt, after a failed commit both
// INTERNAL_ERROR and the store still has none.
func TestReceiptOnlyAfterCommit(t *testing.T) {
	for _, tc := range commitOutcomes {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			entered, free := holdNextCommit(k.s.writer)
			_, raw, err := k.coord.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-held", Text: "held"})
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				r   *protocol.Receipt
				err error
			}
			first, retry := make(chan answer, 1), make(chan answer, 1)
			go func() { r, err := k.s.Submit(context.Background(), "", raw); first <- answer{r, err} }()
			<-entered
			defer free(nil) // a failing check still lets the writer go on
			go func() { r, err := k.s.Submit(context.Background(), "", raw); retry <- answer{r, err} }()
			select {
			case a := <-first:
				t.Fatalf("answered before the commit: %+v", a)
			default:
			}
			var cmd protocol.Command
			if err := json.Unmarshal(raw, &cmd); err != nil {
				t.Fatal(err)
			}
			if _, ok := k.s.receipts.get(cmd.Actor, cmd.ActionID); ok {
				t.Fatal("receipt readable before the commit")
			}
			free(tc.commit)
			a, b := <-first, <-retry
			if tc.commit != nil {
				if protocol.CodeOf(a.err) != protocol.CodeInternalError || protocol.CodeOf(b.err) != protocol.CodeInternalError {
					t.Fatalf("after a failed commit: %v and %v, want INTERNAL_ERROR", a.err, b.err)
				}
				if _, ok := k.s.receipts.get(cmd.Actor, cmd.ActionID); ok {
					t.Fatal("receipt stored by a failed commit")
				}
				return
			}
			if a.err != nil || b.err != nil || a.r.Events[0].EventID != b.r.Events[0].EventID {
				t.Fatalf("after the commit: %+v %v and %+v %v, want one receipt twice", a.r, a.err, b.r, b.err)
			}
			if _, ok := k.s.receipts.get(cmd.Actor, cmd.ActionID); !ok {
				t.Fatal("no receipt after the commit")
			}
		})
	}
}

// commitOutcomes are the two ends of a held commit.
var commitOutcomes = []struct {
	name   string
	commit error
}{{"commit succeeds", nil}, {"commit fails", syscall.EIO}}

// holdNextCommit holds the writer's next commit: entered is closed once it
// is inside it, and free (at most once takes effect) lets it end with err.
func holdNextCommit(w *writer) (entered <-chan struct{}, free func(err error)) {
	in, release := make(chan struct{}), make(chan error)
	var once sync.Once
	w.mu.Lock()
	w.inject = func() error {
		w.mu.Lock()
		w.inject = nil // only the next commit is held
		w.mu.Unlock()
		close(in)
		return <-release
	}
	w.mu.Unlock()
	return in, func(err error) { once.Do(func() { release <- err }) }
}

// TestBeginDecidesBeforeDurable: Begin decides a Command while the commit
// of the one before it is held, and neither is answered until its own
// commit; their events take consecutive sequences in the order begun. A
// failed commit answers both INTERNAL_ERROR.
func TestBeginDecidesBeforeDurable(t *testing.T) {
	for _, tc := range commitOutcomes {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			entered, free := holdNextCommit(k.s.writer)
			defer free(nil)
			var raws [2][]byte
			for i := range raws {
				_, raw, err := k.coord.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{ConversationID: "c", MessageID: fmt.Sprintf("m-%d", i), Text: "pipelined"})
				if err != nil {
					t.Fatal(err)
				}
				raws[i] = raw
			}
			type answer struct {
				r   *protocol.Receipt
				err error
			}
			answers := make(chan answer, 2)
			// A begun Command's wait signs its events, which its commit
			// waits for: it is called at once, as the server does.
			first := k.s.Begin(context.Background(), "", raws[0])
			go func() { r, err := first(); answers <- answer{r, err} }()
			<-entered // the first commit is held inside the writer
			second := k.s.Begin(context.Background(), "", raws[1])
			go func() { r, err := second(); answers <- answer{r, err} }()
			select {
			case a := <-answers:
				t.Fatalf("answered before the commit: %+v", a)
			default:
			}
			free(tc.commit)
			a, b := <-answers, <-answers
			if tc.commit != nil {
				if protocol.CodeOf(a.err) != protocol.CodeInternalError || protocol.CodeOf(b.err) != protocol.CodeInternalError {
					t.Fatalf("after a failed commit: %v and %v, want INTERNAL_ERROR", a.err, b.err)
				}
				return
			}
			if a.err != nil || b.err != nil {
				t.Fatalf("answers %v, %v", a.err, b.err)
			}
			var cmds [2]protocol.Command
			for i := range raws {
				if err := json.Unmarshal(raws[i], &cmds[i]); err != nil {
					t.Fatal(err)
				}
			}
			seq := map[string]uint64{a.r.ActionID: *a.r.Events[0].Sequence, b.r.ActionID: *b.r.Events[0].Sequence}
			if seq[cmds[1].ActionID] != seq[cmds[0].ActionID]+1 {
				t.Fatalf("sequences %v, want the second begun right after the first", seq)
			}
			r, ok := k.s.receipts.get(cmds[1].Actor, cmds[1].ActionID)
			if !ok || *r.Receipt.Events[0].Sequence != seq[cmds[1].ActionID] {
				t.Fatalf("the second Command's receipt %+v %v, want sequence %d", r.Receipt, ok, seq[cmds[1].ActionID])
			}
		})
	}
}
