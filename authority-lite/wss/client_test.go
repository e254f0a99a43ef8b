package wss

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/missionweave/mwp-worker/protocol"
)

// safety bounds every blocking step of a test; it is a hang guard, never
// a timing assertion.
const safety = 30 * time.Second

// startServer serves fb on 127.0.0.1 over plain ws and returns the URL.
// wrap, when set, wraps the listener (tests shrink socket buffers with it).
// configure runs before the server starts (tests install hooks with it).
func startServer(t testing.TB, fb Backend, opts Options, wrap func(net.Listener) net.Listener, configure ...func(*Server)) (string, *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen(ctx, "127.0.0.1:0", ListenOptions{InsecureLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String() + Path
	if wrap != nil {
		ln = wrap(ln)
	}
	srv := NewServer(fb, opts)
	for _, f := range configure {
		f(srv)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return url, srv
}

type client struct {
	t  testing.TB
	ws *websocket.Conn
	// lightEvents skips the schema check of EVENT frames (their event is
	// the fake's own bytes); every other frame is always checked.
	lightEvents bool
}

func dial(t testing.TB, url string, opts *websocket.DialOptions) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(4 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws}
}

func (c *client) sendRaw(typ websocket.MessageType, b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := c.ws.Write(ctx, typ, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) send(s string) { c.t.Helper(); c.sendRaw(websocket.MessageText, []byte(s)) }

// read returns the next frame, checked against the frame schema.
func (c *client) read() any {
	c.t.Helper()
	f, err := c.tryRead()
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *client) tryRead() (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errors.New("server sent a binary message")
	}
	if c.lightEvents && bytes.HasPrefix(b, []byte(`{"event":`)) {
		return protocol.DecodeFrame(b)
	}
	if err := frameProblem(b); err != nil {
		return nil, fmt.Errorf("invalid frame %s: %w", b, err)
	}
	return protocol.DecodeFrame(b)
}

// readError reads the next frame and requires an ERROR with code.
func (c *client) readError(code protocol.Code) *protocol.ErrorFrame {
	c.t.Helper()
	f := c.read()
	e, ok := f.(*protocol.ErrorFrame)
	if !ok || e.Error.Code != code {
		c.t.Fatalf("got %#v, want ERROR %s", f, code)
	}
	return e
}

// closeStatus reads until the connection ends and returns its close code.
func (c *client) closeStatus() websocket.StatusCode {
	c.t.Helper()
	for range 100000 {
		if _, err := c.tryRead(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
	c.t.Fatal("connection never closed")
	return 0
}

// hello opens the session as agent w1 (epoch 3) with a fresh nonce.
func (c *client) hello(fb *fakeBackend, key protocol.PrivateKey, nonce string) {
	c.t.Helper()
	c.sendRaw(websocket.MessageText, helloFrame(c.t, key, "w1", 3, nonce, fb.Now()))
	if h, ok := c.read().(*protocol.Hello); !ok || h.SessionEpoch != 3 {
		c.t.Fatalf("HELLO failed: %#v", h)
	}
}

// openClient dials url and completes HELLO.
func openClient(t testing.TB, url string, fb *fakeBackend, key protocol.PrivateKey, nonce string, opts *websocket.DialOptions) *client {
	c := dial(t, url, opts)
	c.hello(fb, key, nonce)
	return c
}

// eventSeq returns the group and sequence of an EVENT frame, or ok=false.
func eventSeq(f any) (string, uint64, bool) {
	e, ok := f.(*protocol.EventFrame)
	if !ok {
		return "", 0, false
	}
	return e.Event.GroupID, e.Event.Seq(), true
}

// smallBuffers shrinks the kernel socket buffers of accepted connections so
// a client that stops reading blocks the server's writer quickly.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
		_ = tc.SetReadBuffer(4096)
	}
	return c, err
}

// smallReadBufferDialer dials with a small receive buffer.
func smallReadBufferDialer() *websocket.DialOptions {
	d := &net.Dialer{}
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		},
	}}}
}
