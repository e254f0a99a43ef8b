package wss

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/missionweave/mwp-worker/protocol"
)

// until polls cond until it holds; safety is a hang guard, not a timing
// assertion.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// refusal asks url over plain HTTP (from local, "" for the default) and
// returns the 503 answer's Retry-After and error body.
func refusal(t *testing.T, url, local string) (int, string, *protocol.Error) {
	t.Helper()
	d := &net.Dialer{}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: safety}
	resp, err := hc.Get(strings.Replace(url, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e protocol.Error
	if resp.StatusCode == http.StatusServiceUnavailable {
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("503 body %q: %v", body, err)
		}
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), &e
}

func dialFrom(t *testing.T, url, local string) (*client, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
		}
		return nil, err
	}
	ws.SetReadLimit(4 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws}, nil
}

// The total cap counts every accepted connection, said HELLO or not; the
// next one gets 503 with Retry-After and a BACKPRESSURE body before any
// upgrade, and is accepted again once a slot is free.
func TestServeConnectionCap(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, srv := startServer(t, fb, Options{MaxConns: 2, MaxConnsPerIP: 10, HandshakeTimeout: safety}, nil)
	a := openClient(t, url, fb, key, testNonce, nil)
	b := dial(t, url, nil) // holds a slot without HELLO
	_ = b

	code, retry, e := refusal(t, url, "")
	if code != http.StatusServiceUnavailable || retry != "30" || e.Code != protocol.CodeBackpressure || !e.Retryable ||
		e.Details["limit"] != "maxConns" || fmt.Sprint(e.Details["retryAfterMs"]) != "30000" {
		t.Fatalf("over the cap: %d Retry-After %q %+v", code, retry, e)
	}
	if _, _, err := websocket.Dial(context.Background(), url, nil); err == nil {
		t.Fatal("a WebSocket upgrade over the cap succeeded")
	}

	// Of the two admitted connections one completed HELLO.
	if total, _, sessions := srv.connCounts(); total != 2 || sessions != 1 {
		t.Fatalf("admitted %d, in session %d; want 2 and 1", total, sessions)
	}

	_ = a.ws.Close(websocket.StatusNormalClosure, "")
	until(t, "the closed connection's slot to be free", func() bool {
		total, refusing, sessions := srv.connCounts()
		return total == 1 && refusing == 0 && sessions == 0
	})
	c := openClient(t, url, fb, key, "nonce-3333333333333333", nil)
	c.send(`{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`)
	if p, ok := c.read().(*protocol.Ping); !ok || !p.Reply {
		t.Fatalf("after a slot was freed: %#v", p)
	}
}

// The per-address cap counts the connections not yet authenticated: a
// second handshaking connection from one IP gets 503 RATE_LIMITED while
// another address still gets in; once the first one's HELLO succeeds it
// leaves its address's count, so agents behind one address are bounded by
// MaxConns, not by the per-address cap.
func TestServeConnectionCapPerIP(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, srv := startServer(t, fb, Options{MaxConns: 10, MaxConnsPerIP: 1, HandshakeTimeout: safety}, nil)
	first := dial(t, url, nil) // handshaking: holds the address's one slot
	// Retry-After is a second, not the handshake timeout: handshakes end
	// fast, and a fleet behind the address comes back sooner.
	code, retry, e := refusal(t, url, "127.0.0.1")
	if code != http.StatusServiceUnavailable || retry != "1" || e.Code != protocol.CodeRateLimited || e.Details["limit"] != "maxConnsPerIP" ||
		fmt.Sprint(e.Details["retryAfterMs"]) != "1000" {
		t.Fatalf("second connection from 127.0.0.1: %d Retry-After %q %+v", code, retry, e)
	}
	first.hello(fb, key, testNonce)
	for i := range 3 { // each authenticates before the next dials
		dial(t, url, nil).hello(fb, key, fmt.Sprintf("nonce-%016d", i))
	}
	if total, _, sessions := srv.connCounts(); total != 4 || sessions != 4 {
		t.Fatalf("admitted %d, in session %d; want 4 and 4", total, sessions)
	}
	dial(t, url, nil) // handshaking again: the address is full
	if code, _, e := refusal(t, url, "127.0.0.1"); code != http.StatusServiceUnavailable || e.Details["limit"] != "maxConnsPerIP" {
		t.Fatalf("with one connection handshaking: %d %+v", code, e)
	}
	other, err := dialFrom(t, url, "127.0.0.2")
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			t.Skipf("cannot dial from 127.0.0.2 here: %v", err)
		}
		t.Fatalf("another address refused: %v", err)
	}
	other.hello(fb, key, "nonce-4444444444444444")
}

// A connection that never completes HELLO is closed HandshakeTimeout after
// accept, whether it sent nothing at all (closed before any upgrade) or
// upgraded and stayed silent (close 1008); one that said HELLO stays.
func TestServeHandshakeTimeout(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	// Long enough for the first client's dial and HELLO on a loaded machine.
	url, srv := startServer(t, fb, Options{HandshakeTimeout: time.Second}, nil)
	helloed := openClient(t, url, fb, key, testNonce, nil)
	upgraded := dial(t, url, nil)
	raw, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), Path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	// The fake Backend clock never moves: only the accept deadline can
	// close these.
	_ = raw.SetReadDeadline(time.Now().Add(safety))
	if n, err := raw.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("silent TCP connection: read %d, %v; want it closed", n, err)
	}
	if code := upgraded.closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("upgraded without HELLO: close %v, want 1008", code)
	}
	until(t, "both slots released", func() bool { total, _, _ := srv.connCounts(); return total == 1 })
	helloed.send(`{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`)
	if p, ok := helloed.read().(*protocol.Ping); !ok || !p.Reply {
		t.Fatalf("the HELLO'd connection: %#v", p)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Over the cap with the refusal pool full, a connection is closed at once:
// no descriptor is held to explain the refusal.
func TestServeRefusalPoolBounded(t *testing.T) {
	fb := newFakeBackend(t)
	url, srv := startServer(t, fb, Options{MaxConns: 1, MaxConnsPerIP: 1000, HandshakeTimeout: safety}, nil)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), Path)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 1 + 16 { // the admitted one, then the pool of max(16, MaxConns/16)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	until(t, "the cap and the pool to fill", func() bool { total, refusing, _ := srv.connCounts(); return total == 1 && refusing == 16 })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(safety))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a connection beyond the pool was held: %v", err)
	}
}

// HELLO attempts are counted per remote address across connections, before
// any check; PINGs per connection. Both refill on the Backend clock.
func TestServeHelloAndPingRates(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, _ := startServer(t, fb, Options{HelloBurst: 2, HelloEvery: time.Minute, PingBurst: 2, PingEvery: time.Minute}, nil)
	bad := helloFrame(t, key, "w1", 3, testNonce, fb.Now(), "0.2") // refused for its version
	first := dial(t, url, nil)
	first.sendRaw(websocket.MessageText, bad)
	first.readError(protocol.CodeUnsupportedVersion)
	second := dial(t, url, nil)
	second.sendRaw(websocket.MessageText, bad)
	second.readError(protocol.CodeUnsupportedVersion)
	second.sendRaw(websocket.MessageText, helloFrame(t, key, "w1", 3, testNonce, fb.Now()))
	e := second.readError(protocol.CodeRateLimited)
	if !e.Error.Retryable || e.InReplyTo != "c-hello" || fmt.Sprint(e.Error.Details["retryAfterMs"]) != "60000" {
		t.Fatalf("third HELLO: %+v", e.Error)
	}
	fb.mu.Lock()
	reached := len(fb.nonces)
	fb.mu.Unlock()
	if reached != 0 {
		t.Fatal("a rate-limited HELLO reached the Backend")
	}
	fb.clock.Advance(time.Minute)
	second.hello(fb, key, testNonce)

	ping := `{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`
	for range 2 {
		second.send(ping)
		if p, ok := second.read().(*protocol.Ping); !ok || !p.Reply {
			t.Fatalf("PING within the burst: %#v", p)
		}
	}
	second.send(ping)
	if e := second.readError(protocol.CodeRateLimited); e.InReplyTo != "p1" || fmt.Sprint(e.Error.Details["retryAfterMs"]) != "60000" {
		t.Fatalf("third PING: %+v", e.Error)
	}
	fb.clock.Advance(time.Minute)
	second.send(ping)
	if p, ok := second.read().(*protocol.Ping); !ok || !p.Reply {
		t.Fatalf("PING after the refill: %#v", p)
	}
}

// Only HELLOs that fail are charged to their address: any number succeed
// with a burst of one, a failure takes the token, and the next attempt,
// good or not, is refused until it refills; failures let in together are
// all charged.
func TestServeHelloChargesFailuresOnly(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	url, _ := startServer(t, fb, Options{HelloBurst: 1, HelloEvery: time.Minute}, nil)
	for i := range 5 {
		openClient(t, url, fb, key, fmt.Sprintf("nonce-%016d", i), nil)
	}
	bad := dial(t, url, nil)
	bad.sendRaw(websocket.MessageText, helloFrame(t, key, "w1", 3, "nonce-0000000000000000", fb.Now())) // a replay
	bad.readError(protocol.CodeAuthInvalidSignature)
	next := dial(t, url, nil)
	next.sendRaw(websocket.MessageText, helloFrame(t, key, "w1", 3, "nonce-9999999999999999", fb.Now()))
	if e := next.readError(protocol.CodeRateLimited); fmt.Sprint(e.Error.Details["retryAfterMs"]) != "60000" {
		t.Fatalf("after a failed HELLO: %+v", e.Error)
	}
	fb.clock.Advance(time.Minute)
	next.hello(fb, key, "nonce-9999999999999999")
}

// A keyed limiter used with ready and charge lets attempts in while the key
// has a token and charges only those reported: two let in together and
// both charged leave a debt of one, a wait of two intervals.
func TestKeyedLimiterChargesDebt(t *testing.T) {
	k := newKeyedLimiter(time.Second, 1)
	now := testStart
	for range 2 {
		if _, ok := k.ready("a", now); !ok {
			t.Fatal("a full bucket not ready")
		}
	}
	k.charge("a", now)
	k.charge("a", now)
	if wait, ok := k.ready("a", now); ok || wait != 2*time.Second {
		t.Fatalf("after two charges: %v %v; want a 2s wait", wait, ok)
	}
	if _, ok := k.ready("a", now.Add(2*time.Second)); !ok {
		t.Fatal("not ready once the debt is paid")
	}
	if _, ok := k.ready("b", now); !ok || len(k.buckets) != 1 {
		t.Fatalf("ready made a bucket for an unseen key: %d", len(k.buckets))
	}
}

// Per-address HELLO buckets that have refilled are forgotten, so addresses
// that came once do not accumulate; a bucket still draining is kept.
func TestKeyedLimiterSweeps(t *testing.T) {
	k := newKeyedLimiter(time.Second, 2)
	now := testStart
	if _, ok := k.allow("busy", now); !ok {
		t.Fatal("first take refused")
	}
	k.allow("busy", now)
	if wait, ok := k.allow("busy", now); ok || wait != time.Second {
		t.Fatalf("third take: %v %v, want a 1s wait", wait, ok)
	}
	for i := range 1100 {
		k.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
	}
	// 1.5 s later every one-time address is full again; "busy" is not. The
	// map is swept once it has doubled since the last sweep.
	later := now.Add(1500 * time.Millisecond)
	k.allow("busy", later)
	for i := range 1000 {
		k.allow(fmt.Sprintf("10.1.%d.%d", i/256, i%256), later)
	}
	for key := range k.buckets {
		if strings.HasPrefix(key, "10.0.") {
			t.Fatalf("refilled bucket %s kept (%d buckets)", key, len(k.buckets))
		}
	}
	if _, ok := k.buckets["busy"]; !ok || len(k.buckets) != 1001 {
		t.Fatalf("%d buckets, busy kept %v; want the 1000 new ones and busy", len(k.buckets), ok)
	}
}
