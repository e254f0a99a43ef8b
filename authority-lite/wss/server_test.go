package wss

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestServeHelloPingAndViolations(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, _ := startServer(t, fb, Options{}, nil)
	c := dial(t, url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
	if c.ws.Subprotocol() != Subprotocol {
		t.Fatalf("subprotocol %q not selected", c.ws.Subprotocol())
	}
	ping := `{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`
	c.send(ping)
	if e := c.readError(protocol.CodeAuthRequired); e.InReplyTo != "p1" {
		t.Fatalf("inReplyTo %q", e.InReplyTo)
	}
	c.sendRaw(websocket.MessageText, helloFrame(t, key, "w1", 3, testNonce, fb.Now(), "0.2"))
	c.readError(protocol.CodeUnsupportedVersion)
	// The connection survives failed frames: HELLO can follow.
	c.hello(fb, key, "nonce-1111111111111111")
	for _, bad := range []struct {
		typ websocket.MessageType
		msg string
	}{
		{websocket.MessageBinary, ping},
		{websocket.MessageText, `{"type":"PING","frameId":"p1"`},
		{websocket.MessageText, `{"type":"PING","frameId":"p1","nonce":"` + testNonce + `","nonce":"` + testNonce + `"}`},
		{websocket.MessageText, `{"type":"SHOUT","frameId":"p1"}`},
	} {
		c.sendRaw(bad.typ, []byte(bad.msg))
		c.readError(protocol.CodeProtocolViolation)
	}
	c.send(ping)
	if p, ok := c.read().(*protocol.Ping); !ok || !p.Reply || p.Nonce != testNonce {
		t.Fatalf("PING echo %#v", p)
	}
}

func TestServeOversizeCloses(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, _ := startServer(t, fb, Options{MaxFrameBytes: 1024}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	c.send(`{"type":"PING","frameId":"p1","nonce":"` + strings.Repeat("a", 1100) + `"}`)
	if e := c.readError(protocol.CodeProtocolViolation); !strings.Contains(e.Error.Message, "1024") {
		t.Fatalf("message %q", e.Error.Message)
	}
	if code := c.closeStatus(); code != websocket.StatusMessageTooBig {
		t.Fatalf("close status %v, want 1009", code)
	}
}

func TestServeReplayThenLiveWithFilter(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.appendEvents(t, "grp-a", 2, protocol.EvtWorkStarted, "wi-1")
	fb.appendEvents(t, "grp-a", 2, protocol.EvtMessagePosted, "")
	fb.appendEvents(t, "grp-a", 2, protocol.EvtWorkProgressed, "wi-2")
	url, _ := startServer(t, fb, Options{ReplayBatch: 2}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":1,
		"filter":{"types":["work.progressed","work.started"],"workItemIds":["wi-2"]}}]}`)
	// Replay is the durable history: unfiltered, in order, after the cursor.
	for want := uint64(2); want <= 6; want++ {
		if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-a" || seq != want {
			t.Fatalf("replay: got %s/%d, want grp-a/%d", g, seq, want)
		}
	}
	// Live: only matching events; the last one is the marker that proves
	// nothing in between was sent.
	fb.appendEvents(t, "grp-a", 1, protocol.EvtWorkStarted, "wi-1")    // 7: wrong item
	fb.appendEvents(t, "grp-a", 1, protocol.EvtMessagePosted, "")      // 8: wrong type
	fb.appendEvents(t, "grp-a", 1, protocol.EvtWorkBlocked, "wi-2")    // 9: wrong type
	fb.appendEvents(t, "grp-a", 1, protocol.EvtWorkProgressed, "wi-2") // 10
	fb.appendEvents(t, "grp-a", 1, protocol.EvtWorkStarted, "wi-2")    // 11
	if _, seq, _ := eventSeq(c.read()); seq != 10 {
		t.Fatalf("first live event %d, want 10", seq)
	}
	if _, seq, _ := eventSeq(c.read()); seq != 11 {
		t.Fatalf("second live event %d, want 11", seq)
	}
	// ACK cursors reach the Backend.
	c.send(`{"type":"ACK","frameId":"a1","cursors":[{"groupId":"grp-a","sequence":11}]}`)
	c.send(`{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`)
	c.read() // the echo: the ACK before it has been handled
	if got := fb.ackedAt("w1", "grp-a"); got != 11 {
		t.Fatalf("acked %d", got)
	}
}

func TestServeCursorTooOldAndGroupNotFound(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-old", "w1")
	fb.addGroup("grp-ok", "w1")
	fb.addGroup("grp-secret")
	fb.addGroup("grp-broken", "w1")
	fb.eventsErr["grp-broken"] = errors.New("disk on fire")
	fb.appendEvents(t, "grp-old", 3, protocol.EvtMessagePosted, "")
	fb.setFloor("grp-old", 2)
	fb.appendEvents(t, "grp-ok", 1, protocol.EvtMessagePosted, "")
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-old","afterSequence":1},
		{"groupId":"grp-secret","afterSequence":0},{"groupId":"grp-missing","afterSequence":0},{"groupId":"grp-ok","afterSequence":0},
		{"groupId":"grp-broken","afterSequence":0}]}`)
	var errs []*protocol.ErrorFrame
	var okEvents int
	for len(errs) < 4 || okEvents < 1 {
		switch f := c.read().(type) {
		case *protocol.ErrorFrame:
			errs = append(errs, f)
		case *protocol.EventFrame:
			if f.Event.GroupID != "grp-ok" {
				t.Fatalf("event of %s streamed", f.Event.GroupID)
			}
			okEvents++
		default:
			t.Fatalf("unexpected %#v", f)
		}
	}
	byGroup := map[string]*protocol.Error{}
	for _, e := range errs {
		if e.InReplyTo != "s1" {
			t.Fatalf("inReplyTo %q", e.InReplyTo)
		}
		byGroup[e.Error.Details["groupId"].(string)] = e.Error
	}
	old := byGroup["grp-old"]
	snap, _ := old.Details["snapshot"].(map[string]any)
	if old.Code != protocol.CodeCursorTooOld || snap["snapshotId"] != "snap-grp-old" || old.Retryable {
		t.Fatalf("CURSOR_TOO_OLD %+v", old)
	}
	secret, missing := byGroup["grp-secret"], byGroup["grp-missing"]
	if secret.Code != protocol.CodeGroupNotFound || missing.Code != protocol.CodeGroupNotFound || secret.Message != missing.Message {
		t.Fatalf("forbidden %+v vs unknown %+v", secret, missing)
	}
	if b := byGroup["grp-broken"]; b.Code != protocol.CodeInternalError || !b.Retryable || strings.Contains(b.Message, "fire") {
		t.Fatalf("Events failure %+v", b)
	}
	// The failed Group is not streamed: a new event reaches only grp-ok.
	fb.appendEvents(t, "grp-old", 1, protocol.EvtMessagePosted, "")
	fb.appendEvents(t, "grp-ok", 1, protocol.EvtMessagePosted, "")
	if g, seq, _ := eventSeq(c.read()); g != "grp-ok" || seq != 2 {
		t.Fatalf("got %s/%d", g, seq)
	}
}

func TestServeResubscribeRestarts(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.appendEvents(t, "grp-a", 5, protocol.EvtMessagePosted, "")
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	sub := func(after int) {
		c.send(fmt.Sprintf(`{"type":"SUBSCRIBE","frameId":"s%d","groups":[{"groupId":"grp-a","afterSequence":%d}]}`, after, after))
	}
	expect := func(seqs ...uint64) {
		t.Helper()
		for _, want := range seqs {
			if _, seq, ok := eventSeq(c.read()); !ok || seq != want {
				t.Fatalf("got %d, want %d", seq, want)
			}
		}
	}
	sub(0)
	expect(1, 2, 3, 4, 5)
	sub(2)
	expect(3, 4, 5)
	// Exactly one live stream remains: 6 arrives once, then 7.
	fb.appendEvents(t, "grp-a", 2, protocol.EvtMessagePosted, "")
	expect(6, 7)
}

// commandFrame is a COMMAND for group with a blob of unsorted members.
func commandFrame(frameID, actionID, group string) string {
	return fmt.Sprintf(`{"type":"COMMAND","frameId":%q,"command":{"type":"message.post","groupId":%q,"actionId":%q}}`, frameID, group, actionID)
}

func TestServeCommands(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.addGroup("grp-b", "w1")
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)

	c.send(commandFrame("c1", "act-1", "grp-a"))
	ack, ok := c.read().(*protocol.AckFrame)
	if !ok || ack.InReplyTo != "c1" || ack.Receipt.ActionID != "act-1" || *ack.Receipt.Events[0].Sequence != 1 {
		t.Fatalf("ACK %#v", ack)
	}
	if s := fb.submitted(); len(s) != 1 || s[0].peer != "w1" || string(s[0].raw) != `{"actionId":"act-1","groupId":"grp-a","type":"message.post"}` {
		t.Fatalf("submitted %+v", s)
	}
	c.send(commandFrame("c2", "act-2", "grp-none"))
	if e := c.readError(protocol.CodeGroupNotFound); e.InReplyTo != "c2" || e.Error.ActionID != "act-2" {
		t.Fatalf("ERROR %+v", e.Error)
	}

	// Block grp-a's commands; grp-b still answers, and grp-a's second
	// command waits behind its first.
	release := make(chan struct{})
	entered := make(chan string, 4)
	fb.mu.Lock()
	fb.submitHook = func(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
		var cmd struct{ ActionID, GroupID string }
		_ = json.Unmarshal(raw, &cmd)
		if cmd.GroupID == "grp-a" {
			entered <- cmd.ActionID
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{}}, nil
	}
	fb.mu.Unlock()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	c.send(commandFrame("c3", "act-3", "grp-a"))
	if a := <-entered; a != "act-3" {
		t.Fatalf("first grp-a submission %s", a)
	}
	c.send(commandFrame("c4", "act-4", "grp-a"))
	c.send(commandFrame("c5", "act-5", "grp-b"))
	if ack, ok := c.read().(*protocol.AckFrame); !ok || ack.InReplyTo != "c5" {
		t.Fatalf("grp-b waited for grp-a: %#v", ack)
	}
	for _, s := range fb.submitted() {
		if strings.Contains(string(s.raw), "act-4") {
			t.Fatal("act-4 reached the Backend before act-3 finished")
		}
	}
	close(release)
	for _, want := range []string{"c3", "c4"} {
		if ack, ok := c.read().(*protocol.AckFrame); !ok || ack.InReplyTo != want {
			t.Fatalf("got %#v, want ACK for %s", ack, want)
		}
	}
}

func TestServeCommandLimit(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	url, _ := startServer(t, fb, Options{MaxPendingCommands: 1}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	release := make(chan struct{})
	fb.mu.Lock()
	fb.submitHook = func(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &protocol.Receipt{ActionID: "act-1", Events: protocol.List[protocol.EventRef]{}}, nil
	}
	fb.mu.Unlock()
	c.send(commandFrame("c1", "act-1", "grp-a"))
	c.send(commandFrame("c2", "act-2", "grp-a"))
	e := c.readError(protocol.CodeBackpressure)
	if !e.Error.Retryable || e.InReplyTo != "c2" || e.Error.ActionID != "act-2" {
		t.Fatalf("busy %+v", e.Error)
	}
	close(release)
	if ack, ok := c.read().(*protocol.AckFrame); !ok || ack.InReplyTo != "c1" {
		t.Fatalf("got %#v", ack)
	}
}

// TestServeBackpressure: a hot Group larger than every buffer on the path
// and a client that stops reading. The hot stream must pause with
// BACKPRESSURE, the cold Group's events must overtake the hot backlog, and
// every hot event must still arrive exactly once, in order.
func TestServeBackpressure(t *testing.T) {
	const hot = 600
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-hot", "w1")
	fb.addGroup("grp-cold", "w1")
	fb.appendEvents(t, "grp-hot", hot, protocol.EvtWorkProgressed, "wi-1")
	paused := make(chan string, 1)
	var reported sync.Map // Options.OnBackpressure, the operator's metric
	url, _ := startServer(t, fb, Options{SendBuffer: 8, ReplayBatch: 16, OnBackpressure: func(g string) { reported.Store(g, true) }}, func(ln net.Listener) net.Listener { return smallBuffers{ln} },
		func(srv *Server) {
			srv.hooks.paused = func(g string) {
				select {
				case paused <- g:
				default:
				}
			}
		})
	c := openClient(t, url, fb, key, testNonce, smallReadBufferDialer())
	c.lightEvents = true
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-hot","afterSequence":0},{"groupId":"grp-cold","afterSequence":0}]}`)
	// Not reading: the hot stream fills the sockets and its lane, then pauses.
	if g := <-paused; g != "grp-hot" {
		t.Fatalf("paused %s", g)
	}
	if _, ok := reported.Load("grp-hot"); !ok {
		t.Fatal("the pause was not reported to Options.OnBackpressure")
	}
	fb.appendEvents(t, "grp-cold", 3, protocol.EvtMessagePosted, "")

	var hotSeen uint64
	var hotBeforeCold, hotAfterAppend, bp int
	var cold []uint64
	for hotSeen < hot || len(cold) < 4 {
		switch f := c.read().(type) {
		case *protocol.Backpressure:
			if f.GroupID != "grp-hot" || f.RetryAfterMs != 200 {
				t.Fatalf("BACKPRESSURE %+v", f)
			}
			bp++
			fb.clock.Advance(200 * time.Millisecond) // allow the next notice
		case *protocol.EventFrame:
			switch f.Event.GroupID {
			case "grp-hot":
				if f.Event.Seq() != hotSeen+1 {
					t.Fatalf("hot event %d after %d: lost or duplicated", f.Event.Seq(), hotSeen)
				}
				hotSeen++
				switch {
				case len(cold) == 0:
					hotBeforeCold++
				case hotSeen == hot/2:
					// Mid-backlog, the cold Group gets a live event.
					fb.appendEvents(t, "grp-cold", 1, protocol.EvtMessagePosted, "")
				case hotSeen > hot/2 && len(cold) == 3:
					hotAfterAppend++
				}
			case "grp-cold":
				cold = append(cold, f.Event.Seq())
			}
		default:
			t.Fatalf("unexpected %#v", f)
		}
	}
	if bp == 0 {
		t.Fatal("no BACKPRESSURE frame")
	}
	if fmt.Sprint(cold) != "[1 2 3 4]" {
		t.Fatalf("cold events %v", cold)
	}
	// What was already in the sockets and the hot lane goes first; the
	// rest of the backlog must not.
	if hotBeforeCold > hot/4 || hotAfterAppend > hot/4 {
		t.Fatalf("the cold Group waited behind %d, then %d of %d hot events", hotBeforeCold, hotAfterAppend, hot)
	}
	t.Logf("cold waited behind %d, then %d hot events; %d BACKPRESSURE frames", hotBeforeCold, hotAfterAppend, bp)
}

func TestServeLiveness(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	opts := Options{HandshakeTimeout: 10 * time.Second, IdleTimeout: time.Minute, PingInterval: 20 * time.Second, Tick: 2 * time.Millisecond}
	url, _ := startServer(t, fb, opts, nil)

	silent := dial(t, url, nil)
	fb.clock.Advance(10 * time.Second)
	if code := silent.closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("no HELLO: close %v", code)
	}

	c := openClient(t, url, fb, key, testNonce, nil)
	fb.clock.Advance(25 * time.Second)
	p, ok := c.read().(*protocol.Ping)
	if !ok || p.Reply {
		t.Fatalf("server PING %#v", p)
	}
	c.send(`{"type":"PING","frameId":"r1","nonce":"` + p.Nonce + `","reply":true}`)
	c.send(`{"type":"PING","frameId":"r2","nonce":"` + testNonce + `"}`)
	c.read() // the echo: the reply before it was seen at +25 s
	fb.clock.Advance(50 * time.Second)
	// 50 s after the reply: a PING (silent > 20 s), not yet a close.
	if p, ok := c.read().(*protocol.Ping); !ok || p.Reply {
		t.Fatalf("second server PING %#v", p)
	}
	fb.clock.Advance(10 * time.Second)
	if code := c.closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("idle: close %v", code)
	}
}

func TestServerCloseGoesAway(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, srv := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Close()
	}()
	if code := c.closeStatus(); code != websocket.StatusGoingAway {
		t.Fatalf("close %v", code)
	}
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, url, nil); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("dial after Close: %v", err)
	}
}

func TestServeMaxGroups(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.addGroup("grp-b", "w1")
	url, _ := startServer(t, fb, Options{MaxGroups: 1}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0},{"groupId":"grp-b","afterSequence":0}]}`)
	if e := c.readError(protocol.CodeRateLimited); e.Error.Details["groupId"] != "grp-b" || !e.Error.Retryable {
		t.Fatalf("limit %+v", e.Error)
	}
	// Restarting a Group already streamed is not a new one.
	c.send(`{"type":"SUBSCRIBE","frameId":"s2","groups":[{"groupId":"grp-a","afterSequence":0}]}`)
	fb.appendEvents(t, "grp-a", 1, protocol.EvtMessagePosted, "")
	fb.appendEvents(t, "grp-b", 1, protocol.EvtMessagePosted, "")
	if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-a" || seq != 1 {
		t.Fatalf("got %s/%d", g, seq)
	}
}
