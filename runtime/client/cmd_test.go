package client

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

func outboxIDs(t *testing.T, s *queue.Store) []string {
	t.Helper()
	var ids []string
	for e, err := range s.Outbox() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ActionID)
	}
	return ids
}

func TestSendReceiptAndProtocolError(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		if !bytes.Contains(raw, []byte(`"act-bad"`)) {
			return false // default ACK
		}
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID,
			Error: protocol.Errorf(protocol.CodeRevisionConflict, "expected revision 3, is 4")})
		return true
	}
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	ctx := context.Background()

	good := signedCommand(t, "act-good", "grp-a")
	rc, err := r.c.Send(ctx, good)
	if err != nil || rc.ActionID != "act-good" {
		t.Fatalf("Send = %+v, %v", rc, err)
	}
	_, err = r.c.Send(ctx, signedCommand(t, "act-bad", "grp-a"))
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeRevisionConflict {
		t.Fatalf("Send = %v, want the REVISION_CONFLICT *protocol.Error", err)
	}
	if ids := outboxIDs(t, store); len(ids) != 0 {
		t.Fatalf("answered Commands left in the outbox: %v", ids)
	}
	_, cmds, _, _ := fs.snapshot()
	if len(cmds) != 2 || !bytes.Equal(cmds[0], good) {
		t.Fatalf("server got %d commands; first equal to the signed bytes: %v", len(cmds), len(cmds) > 0 && bytes.Equal(cmds[0], good))
	}
	if _, err := r.c.Send(ctx, []byte(`{"type":"x"}`)); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("Send without actionId = %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Send(ctx, good); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Send after Run returned = %v", err)
	}
}

func TestRateLimitedCommandIsResentUnchanged(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	calls := 0
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		calls++ // the reader goroutine of one connection: no lock needed
		if calls > 1 {
			return false
		}
		e := protocol.Errorf(protocol.CodeRateLimited, "slow down")
		e.Details = map[string]any{"retryAfterMs": 1}
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID, Error: e})
		return true
	}
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	cmd := signedCommand(t, "act-1", "grp-a")
	rc, err := r.c.Send(context.Background(), cmd)
	if err != nil || rc.ActionID != "act-1" {
		t.Fatalf("Send = %+v, %v", rc, err)
	}
	_, cmds, _, _ := fs.snapshot()
	if len(cmds) != 2 || !bytes.Equal(cmds[0], cmd) || !bytes.Equal(cmds[1], cmd) {
		t.Fatalf("server got %d commands, want the same bytes twice", len(cmds))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestBackpressurePausesOnlyItsGroup: after BACKPRESSURE for grp-a, a
// grp-a Command waits out retryAfterMs while a grp-b Command goes at once.
func TestBackpressurePausesOnlyItsGroup(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		if bytes.Contains(raw, []byte(`"act-a0"`)) {
			// BACKPRESSURE first: when the client has the receipt, it has
			// handled the pause.
			sc.control(protocol.Backpressure{Type: protocol.FrameBackpressure, FrameID: "s-bp", GroupID: "grp-a", RetryAfterMs: 60000})
		}
		return false
	}
	clk := clock.NewFake(t0)
	fs.now = clk.Now
	store := openStore(t, t.TempDir())
	defer store.Close()
	queued := make(chan string, 10)
	r := startClient(t, fs, Config{Store: store, Clock: clk, Rand: func() float64 { return 0 }},
		func(c *Client) { c.hookQueued = func(id string) { queued <- id } })
	r.connected(t)
	ctx := context.Background()
	if _, err := r.c.Send(ctx, signedCommand(t, "act-a0", "grp-a")); err != nil {
		t.Fatal(err)
	}
	<-queued // act-a0

	var wg sync.WaitGroup
	wg.Add(1)
	var a1Err error
	go func() {
		defer wg.Done()
		_, a1Err = r.c.Send(ctx, signedCommand(t, "act-a1", "grp-a"))
	}()
	if id := <-queued; id != "act-a1" {
		t.Fatalf("queued %s", id)
	}
	if _, err := r.c.Send(ctx, signedCommand(t, "act-b1", "grp-b")); err != nil {
		t.Fatalf("grp-b Command during grp-a backpressure: %v", err)
	}
	_, cmds, _, _ := fs.snapshot()
	for _, c := range cmds {
		if bytes.Contains(c, []byte(`"act-a1"`)) {
			t.Fatal("grp-a Command sent during its backpressure pause")
		}
	}
	clk.Advance(60 * time.Second)
	wg.Wait()
	if a1Err != nil {
		t.Fatalf("paused Command after the pause: %v", a1Err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxResendAfterRestart: a Command sent but never answered survives
// closing the client and the store; after reopening, the same bytes reach
// the authority again, and its answer empties the outbox.
func TestOutboxResendAfterRestart(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		return sc.num == 1 // the first connection swallows Commands
	}
	dir := t.TempDir()
	store := openStore(t, dir)
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	cmd1, cmd2 := signedCommand(t, "act-1", "grp-a"), signedCommand(t, "act-2", "grp-b")
	errs := make(chan error, 2)
	for _, c := range [][]byte{cmd1, cmd2} {
		go func() {
			_, err := r.c.Send(context.Background(), c)
			errs <- err
		}()
		waitFor(t, r.sig, "command at the server", func() bool {
			_, cmds, _, _ := fs.snapshot()
			return len(cmds) > 0 && bytes.Equal(cmds[len(cmds)-1], c)
		})
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Send when Run stopped = %v", err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store = openStore(t, dir)
	defer store.Close()
	if ids := outboxIDs(t, store); len(ids) != 2 {
		t.Fatalf("outbox after reopening = %v", ids)
	}
	r2 := startClient(t, fs, Config{Store: store})
	waitFor(t, r2.sig, "outbox emptied by the receipts", func() bool { return len(outboxIDs(t, store)) == 0 })
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var again [][]byte
	for i, c := range fs.cmds {
		if fs.cmdConn[i] > 1 {
			again = append(again, c)
		}
	}
	if len(again) != 2 || !bytes.Equal(again[0], cmd1) || !bytes.Equal(again[1], cmd2) {
		t.Fatalf("resent after restart: %d commands; want cmd1, cmd2 with their original bytes, in order", len(again))
	}
}

// TestOutboxResentOnReconnectBeforeNewCommands: after a dropped
// connection, the pending Command goes out again first, then a new one.
func TestOutboxResentOnReconnectBeforeNewCommands(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		if sc.num == 1 {
			go sc.ws.CloseNow() // lose the connection before answering
			return true
		}
		return false
	}
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	cmd1 := signedCommand(t, "act-1", "grp-a")
	if _, err := r.c.Send(context.Background(), cmd1); err != nil {
		t.Fatalf("Send across a reconnect: %v", err)
	}
	cmd2 := signedCommand(t, "act-2", "grp-a")
	if _, err := r.c.Send(context.Background(), cmd2); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	_, cmds, _, _ := fs.snapshot()
	if len(cmds) != 3 || !bytes.Equal(cmds[0], cmd1) || !bytes.Equal(cmds[1], cmd1) || !bytes.Equal(cmds[2], cmd2) {
		t.Fatalf("server saw %d commands; want cmd1, cmd1 again after reconnecting, then cmd2", len(cmds))
	}
}

func TestCommandAnsweredStaleSessionEndsRun(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID,
			Error: protocol.Errorf(protocol.CodeAuthStaleSession, "session 1 was replaced by 2")})
		return true
	}
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	_, err := r.c.Send(context.Background(), signedCommand(t, "act-1", "grp-a"))
	if protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
		t.Fatalf("Send = %v", err)
	}
	if err := r.wait(t); !errors.Is(err, ErrSessionReplaced) {
		t.Fatalf("Run = %v, want ErrSessionReplaced", err)
	}
	if r.st.count(StateSessionReplaced) != 1 {
		t.Fatal("session replacement not reported")
	}
}
