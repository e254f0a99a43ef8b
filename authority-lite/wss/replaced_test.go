package wss

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/missionweave/mwp-worker/protocol"
)

// agentCommandFrame is a COMMAND signed-looking enough for the fake: an
// agent command of w1 stamped with a session epoch.
func agentCommandFrame(frameID, actionID, group string, epoch uint64) string {
	return fmt.Sprintf(`{"type":"COMMAND","frameId":%q,"command":{"type":"message.post","groupId":%q,"actionId":%q,"actor":{"kind":"agent","id":"w1"},"sessionEpoch":%d}}`,
		frameID, group, actionID, epoch)
}

func (c *client) helloAt(fb *fakeBackend, key protocol.PrivateKey, epoch uint64, nonce string) {
	c.t.Helper()
	c.sendRaw(websocket.MessageText, helloFrame(c.t, key, "w1", epoch, nonce, fb.Now()))
	if h, ok := c.read().(*protocol.Hello); !ok || h.SessionEpoch != epoch {
		c.t.Fatalf("HELLO at %d failed: %#v", epoch, h)
	}
}

func submittedAction(fb *fakeBackend, actionID string) bool {
	for _, s := range fb.submitted() {
		if strings.Contains(string(s.raw), `"`+actionID+`"`) {
			return true
		}
	}
	return false
}

// A connection of a replaced session is served no more: while a command it
// sent before is still running, new SUBSCRIBEs and COMMANDs are refused with
// AUTH_STALE_SESSION and no event decided after the replacement reaches it;
// the running command's ACK still arrives (the connection that sent
// session_open gets its receipt), then a final ERROR AUTH_STALE_SESSION
// without inReplyTo and close 1008. The new session's connection streams on.
func TestServeReplacedSessionEnds(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.addGroup("grp-b", "w1")
	fb.appendEvents(t, "grp-a", 1, protocol.EvtMessagePosted, "")
	url, _ := startServer(t, fb, Options{}, nil)
	old := openClient(t, url, fb, key, testNonce, nil)
	old.lightEvents = true
	old.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0}]}`)
	if _, seq, ok := eventSeq(old.read()); !ok || seq != 1 {
		t.Fatalf("replay before the replacement: %d", seq)
	}

	// One command of the old session is running when the session is replaced.
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	fb.mu.Lock()
	fb.submitHook = func(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
		var cmd struct{ ActionID string }
		_ = json.Unmarshal(raw, &cmd)
		if cmd.ActionID == "act-open" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{}}, nil
	}
	fb.mu.Unlock()
	old.send(agentCommandFrame("c1", "act-open", "grp-b", 3))
	<-entered
	fb.setEpoch("w1", 4)
	fb.appendEvents(t, "grp-a", 1, protocol.EvtMessagePosted, "") // decided after the replacement

	old.send(`{"type":"SUBSCRIBE","frameId":"s2","groups":[{"groupId":"grp-b","afterSequence":0}]}`)
	e := old.readError(protocol.CodeAuthStaleSession)
	if e.InReplyTo != "s2" || fmt.Sprint(e.Error.Details["sessionEpoch"]) != "4" || fmt.Sprint(e.Error.Details["helloSessionEpoch"]) != "3" {
		t.Fatalf("SUBSCRIBE refusal %+v", e.Error)
	}
	for _, epoch := range []uint64{3, 4} { // its own epoch, and the successor's
		old.send(agentCommandFrame("c2", fmt.Sprintf("act-late-%d", epoch), "grp-b", epoch))
		if e := old.readError(protocol.CodeAuthStaleSession); e.InReplyTo != "c2" {
			t.Fatalf("COMMAND refusal %+v", e.Error)
		}
		if submittedAction(fb, fmt.Sprintf("act-late-%d", epoch)) {
			t.Fatalf("a command of epoch %d on the replaced connection reached the Backend", epoch)
		}
	}
	close(release)
	if ack, ok := old.read().(*protocol.AckFrame); !ok || ack.InReplyTo != "c1" {
		t.Fatalf("got %#v, want the ACK of the command running at the replacement", ack)
	}
	final := old.readError(protocol.CodeAuthStaleSession)
	if final.InReplyTo != "" || final.Error.InReplyTo != "" || final.Error.Retryable {
		t.Fatalf("final ERROR %+v", final.Error)
	}
	if code := old.closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v, want 1008", code)
	}

	// The new session's connection is served, from the same events.
	cur := dial(t, url, nil)
	cur.lightEvents = true
	cur.helloAt(fb, key, 4, "nonce-2222222222222222")
	cur.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":1}]}`)
	if _, seq, ok := eventSeq(cur.read()); !ok || seq != 2 {
		t.Fatalf("new session replay: %d", seq)
	}
}

// An idle connection of a replaced session, with nothing running and
// nothing subscribed, is closed by itself.
func TestServeReplacedIdleConnectionCloses(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	fb.setEpoch("w1", 4)
	if e := c.readError(protocol.CodeAuthStaleSession); fmt.Sprint(e.Error.Details["sessionEpoch"]) != "4" {
		t.Fatalf("final ERROR %+v", e.Error)
	}
	if code := c.closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v, want 1008", code)
	}
}

// On a live connection, the peer's commands must carry the session epoch
// of its HELLO: another one is AUTH_STALE_SESSION at /sessionEpoch and
// never reaches the Backend. Commands of other actors are the Backend's.
func TestServeCommandEpochBoundToHello(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	for _, tc := range []struct {
		name, epoch string
	}{{"older", "2"}, {"newer", "4"}, {"newer as a float", "4.0"}} {
		frame := fmt.Sprintf(`{"type":"COMMAND","frameId":"c1","command":{"type":"message.post","groupId":"grp-a","actionId":"act-x","actor":{"kind":"agent","id":"w1"},"sessionEpoch":%s}}`, tc.epoch)
		c.send(frame)
		e := c.readError(protocol.CodeAuthStaleSession)
		if e.InReplyTo != "c1" || e.Error.ActionID != "act-x" || e.Error.Details["pointer"] != "/sessionEpoch" ||
			fmt.Sprint(e.Error.Details["helloSessionEpoch"]) != "3" || fmt.Sprint(e.Error.Details["sessionEpoch"]) != "3" {
			t.Fatalf("%s: %+v", tc.name, e.Error)
		}
	}
	if submittedAction(fb, "act-x") {
		t.Fatal("a command of another session reached the Backend")
	}
	// Its own epoch, a human command without one, and another agent's
	// command (the Backend refuses that one) all go through.
	c.send(agentCommandFrame("c2", "act-own", "grp-a", 3))
	c.send(`{"type":"COMMAND","frameId":"c3","command":{"type":"message.post","groupId":"grp-a","actionId":"act-human","actor":{"kind":"human","id":"alice"}}}`)
	c.send(`{"type":"COMMAND","frameId":"c4","command":{"type":"message.post","groupId":"grp-a","actionId":"act-other","actor":{"kind":"agent","id":"w2"},"sessionEpoch":9}}`)
	for _, want := range []string{"c2", "c3", "c4"} {
		if ack, ok := c.read().(*protocol.AckFrame); !ok || ack.InReplyTo != want {
			t.Fatalf("got %#v, want ACK %s", ack, want)
		}
	}
}

// An outside client pipelines: session_open, then commands at once on the
// same connection, without waiting for the receipt. Each command gets an
// answer before the final ERROR and close 1008: an ACK or refusal when it
// was read before the replacement, AUTH_STALE_SESSION after it.
func TestServeReplacedAnswersPipelinedCommands(t *testing.T) {
	for round := range 5 {
		fb := newFakeBackend(t)
		key := fb.addAgent(t, "w1", 3)
		fb.addGroup("grp-b", "w1")
		url, _ := startServer(t, fb, Options{}, nil)
		c := openClient(t, url, fb, key, testNonce, nil)
		fb.mu.Lock()
		fb.submitHook = func(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
			var cmd struct{ ActionID string }
			_ = json.Unmarshal(raw, &cmd)
			if cmd.ActionID == "act-open" {
				fb.setEpoch("w1", 4) // the session_open commits
			}
			return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{}}, nil
		}
		fb.mu.Unlock()
		const n = 20
		c.send(agentCommandFrame("c0", "act-open", "grp-b", 3))
		for i := 1; i <= n; i++ {
			c.send(agentCommandFrame(fmt.Sprintf("c%d", i), fmt.Sprintf("act-%d", i), "grp-b", 3))
		}
		answered := map[string]bool{}
		for {
			f, err := c.tryRead()
			if err != nil {
				if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
					t.Fatalf("round %d: connection ended with %v, want close 1008", round, err)
				}
				break
			}
			switch f := f.(type) {
			case *protocol.AckFrame:
				answered[f.InReplyTo] = true
			case *protocol.ErrorFrame:
				if f.InReplyTo != "" {
					answered[f.InReplyTo] = true
				}
			}
		}
		for i := 0; i <= n; i++ {
			if id := fmt.Sprintf("c%d", i); !answered[id] {
				t.Fatalf("round %d: %s got no answer before the close (%d of %d answered)", round, id, len(answered), n+1)
			}
		}
	}
}
