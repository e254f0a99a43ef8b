package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// wireConn is a bare test client of the binding.
type wireConn struct {
	t  *testing.T
	ws *websocket.Conn
}

// serveLoopback serves s over plain ws on 127.0.0.1 until the test ends.
func serveLoopback(t *testing.T, s *Service, opts wss.Options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := wss.Listen(ctx, "127.0.0.1:0", wss.ListenOptions{InsecureLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wss.NewServer(s, opts).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "ws://" + ln.Addr().String() + wss.Path
}

// helloAs dials url and says HELLO as p's agent at epoch; it returns the
// connection and the answer frame.
func helloAs(t *testing.T, url string, p *Principal, epoch uint64) (*wireConn, any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(4 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	c := &wireConn{t: t, ws: ws}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	proof := protocol.HelloProof{AgentID: p.Actor.ID, SessionEpoch: epoch, Nonce: hex.EncodeToString(nonce[:]), IssuedAt: protocol.NewTime(p.s.Now())}
	proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: p.Key.KeyID, CreatedAt: proof.IssuedAt}
	signed, err := protocol.SignedValue(proof, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(signed, &proof); err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: "h1", ProtocolVersions: []string{protocol.Version}, AgentID: p.Actor.ID, SessionEpoch: epoch, Proof: &proof})
	if err := c.send(string(hello)); err != nil {
		t.Fatal(err)
	}
	f, err := c.read()
	if err != nil {
		t.Fatalf("HELLO: %v", err)
	}
	return c, f
}

func (c *wireConn) send(s string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, []byte(s))
}

func (c *wireConn) read() (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeFrame(b)
}

// command sends raw as a COMMAND frame.
func (c *wireConn) command(frameID string, raw []byte) error {
	return c.send(fmt.Sprintf(`{"type":"COMMAND","frameId":%q,"command":%s}`, frameID, raw))
}

// rest reads every frame until the connection ends and returns them with
// the close status.
func (c *wireConn) rest() ([]any, websocket.StatusCode) {
	var out []any
	for range 10000 {
		f, err := c.read()
		if err != nil {
			return out, websocket.CloseStatus(err)
		}
		out = append(out, f)
	}
	c.t.Fatal("the connection never ended")
	return nil, 0
}

// The spec 15.1 / 17 session fence over the real server and Service: once
// session 2 of w1 is open, the connection that said HELLO at session 1 is
// served no more — no event decided afterwards, no COMMAND (not even one
// stamped with the new epoch 2), a final AUTH_STALE_SESSION, close 1008 —
// and the connection that sent session_open gets its receipt first.
func TestWireReplacedSessionIsCut(t *testing.T) {
	k := newSvc(t)
	url := serveLoopback(t, k.s, wss.Options{})
	w1 := k.w["w1"]
	post := func(id string) {
		k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: id})
	}

	old, f := helloAs(t, url, w1, 1)
	if h, ok := f.(*protocol.Hello); !ok || h.SessionEpoch != 1 {
		t.Fatalf("HELLO at 1: %#v", f)
	}
	before := k.s.LastSequence("grp-a")
	if err := old.send(fmt.Sprintf(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":%d}]}`, before)); err != nil {
		t.Fatal(err)
	}
	post("m-live")
	if f, err := old.read(); err != nil {
		t.Fatal(err)
	} else if e, ok := f.(*protocol.EventFrame); !ok || e.Event.Seq() != before+1 {
		t.Fatalf("live event before the replacement: %#v", f)
	}
	cut := k.s.LastSequence("grp-a")

	// Session 2, opened from a second connection of session 1.
	opener, _ := helloAs(t, url, w1, 1)
	a := k.s.org.agent("w1")
	_, open, err := w1.Build(protocol.CmdSessionOpen, "", &protocol.OpenSessionPayload{AgentID: "w1", SessionEpoch: 2, AgentCardHash: a.CardHash})
	if err != nil {
		t.Fatal(err)
	}
	if err := opener.command("c-open", open); err != nil {
		t.Fatal(err)
	}
	frames, code := opener.rest()
	if len(frames) != 2 || code != websocket.StatusPolicyViolation {
		t.Fatalf("opener got %d frames, close %v: %#v", len(frames), code, frames)
	}
	if ack, ok := frames[0].(*protocol.AckFrame); !ok || ack.InReplyTo != "c-open" {
		t.Fatalf("opener's first frame %#v, want the session_open receipt", frames[0])
	}
	if e, ok := frames[1].(*protocol.ErrorFrame); !ok || e.Error.Code != protocol.CodeAuthStaleSession {
		t.Fatalf("opener's last frame %#v", frames[1])
	}

	// Decided after the replacement: an event, and a command of w1 stamped
	// with the new epoch sent on the old connection.
	post("m-after")
	lateCmd, late, err := w1.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "m-late", ConversationID: "c", Text: "late"})
	if err != nil {
		t.Fatal(err)
	}
	_ = old.command("c-late", late) // may fail: the server may have closed already
	frames, code = old.rest()
	if code != websocket.StatusPolicyViolation {
		t.Fatalf("old connection closed with %v, want 1008", code)
	}
	stale := false
	for _, f := range frames {
		switch f := f.(type) {
		case *protocol.EventFrame:
			if f.Event.Seq() > cut {
				t.Fatalf("event %d decided after the replacement reached the old session", f.Event.Seq())
			}
		case *protocol.AckFrame:
			t.Fatalf("the old session got an ACK: %#v", f)
		case *protocol.ErrorFrame:
			if f.Error.Code != protocol.CodeAuthStaleSession {
				t.Fatalf("old connection: %v", f.Error)
			}
			stale = true
		}
	}
	if !stale {
		t.Fatalf("no AUTH_STALE_SESSION before the close: %#v", frames)
	}
	if *lateCmd.SessionEpoch != 2 {
		t.Fatalf("the late command carries epoch %d, want the new 2", *lateCmd.SessionEpoch)
	}
	if _, ok := k.s.receipts.get(agent("w1"), lateCmd.ActionID); ok {
		t.Fatal("the late command was accepted")
	}

	// The new session is served; a command stamped with the old epoch on
	// it is refused.
	cur, f := helloAs(t, url, w1, 2)
	if h, ok := f.(*protocol.Hello); !ok || h.SessionEpoch != 2 {
		t.Fatalf("HELLO at 2: %#v", f)
	}
	_, stamped, err := w1.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "m-old-epoch", ConversationID: "c", Text: "x"},
		func(e *protocol.Envelope) { e.SessionEpoch = protocol.Uint64(1) })
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.command("c-old", stamped); err != nil {
		t.Fatal(err)
	}
	if f, err := cur.read(); err != nil {
		t.Fatal(err)
	} else if e, ok := f.(*protocol.ErrorFrame); !ok || e.Error.Code != protocol.CodeAuthStaleSession || e.InReplyTo != "c-old" {
		t.Fatalf("old-epoch command on the new session: %#v", f)
	}
	_ = cur.send(fmt.Sprintf(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":%d}]}`, cut))
	if f, err := cur.read(); err != nil {
		t.Fatal(err)
	} else if e, ok := f.(*protocol.EventFrame); !ok || e.Event.Seq() != cut+1 {
		t.Fatalf("new session stream: %#v", f)
	}
}
