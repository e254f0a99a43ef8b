package wss

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

const testNonce = "nonce-0123456789abcdef"

// checkFrame fails the test unless b is one valid frame (strict decode and
// the frame schema) and returns it decoded.
func checkFrame(t testing.TB, b []byte) any {
	t.Helper()
	if err := frameProblem(b); err != nil {
		t.Fatalf("server sent an invalid frame %s: %v", b, err)
	}
	f, _ := protocol.DecodeFrame(b)
	return f
}

// frameProblem is checkFrame's test, shared with the fuzz target.
func frameProblem(b []byte) error {
	parsed, err := protocol.Parse(b, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	f, err := protocol.DecodeFrameParsed(b, parsed)
	if err != nil {
		return err
	}
	if err := protocol.Validate("websocket-frame", parsed); err != nil {
		return err
	}
	if e, ok := f.(*protocol.ErrorFrame); ok {
		m := parsed.(map[string]any)["error"]
		if err := protocol.Validate("error", m); err != nil {
			return err
		}
		if !e.Error.Code.Known() {
			return errors.New("unknown error code")
		}
	}
	return nil
}

func frame(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type sessionKit struct {
	fb  *fakeBackend
	key protocol.PrivateKey
	s   *session
}

func newSessionKit(t testing.TB) *sessionKit {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.addGroup("grp-b") // exists, w1 is not a reader
	return &sessionKit{fb: fb, key: key, s: newSession(fb, newFrameIDs(), 4096, slog.New(slog.DiscardHandler))}
}

func (k *sessionKit) handle(t testing.TB, m inbound) (output, []any) {
	t.Helper()
	out := k.s.handle(context.Background(), m)
	var fs []any
	for _, b := range out.send {
		fs = append(fs, checkFrame(t, b))
	}
	return out, fs
}

func (k *sessionKit) text(t testing.TB, b []byte) (output, []any) {
	t.Helper()
	return k.handle(t, inbound{data: b})
}

func (k *sessionKit) open(t testing.TB) {
	t.Helper()
	_, fs := k.text(t, helloFrame(t, k.key, "w1", 3, testNonce, k.fb.Now()))
	if len(fs) != 1 {
		t.Fatalf("HELLO answered with %d frames", len(fs))
	}
	if _, ok := fs[0].(*protocol.Hello); !ok {
		t.Fatalf("HELLO answered with %#v", fs[0])
	}
}

// onlyError returns the one ERROR frame of fs.
func onlyError(t testing.TB, fs []any) *protocol.ErrorFrame {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("got %d frames, want one ERROR", len(fs))
	}
	e, ok := fs[0].(*protocol.ErrorFrame)
	if !ok {
		t.Fatalf("got %T, want ERROR", fs[0])
	}
	return e
}

func TestSessionBeforeHello(t *testing.T) {
	ping := `{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`
	cases := []struct {
		name      string
		in        inbound
		code      protocol.Code
		inReplyTo string
		close     bool
	}{
		{"binary", inbound{binary: true, data: []byte(ping)}, protocol.CodeProtocolViolation, "", false},
		{"malformed JSON", inbound{data: []byte(`{"type":"PING",`)}, protocol.CodeProtocolViolation, "", false},
		{"duplicate member", inbound{data: []byte(`{"type":"PING","frameId":"p1","frameId":"p2","nonce":"` + testNonce + `"}`)}, protocol.CodeProtocolViolation, "", false},
		{"not an object", inbound{data: []byte(`[1]`)}, protocol.CodeProtocolViolation, "", false},
		{"no type", inbound{data: []byte(`{"frameId":"x1"}`)}, protocol.CodeProtocolViolation, "x1", false},
		{"unknown type", inbound{data: []byte(`{"type":"NOPE","frameId":"x1"}`)}, protocol.CodeProtocolViolation, "x1", false},
		{"oversize", inbound{oversize: true, data: []byte(`{"type":"PING"`)}, protocol.CodeProtocolViolation, "", true},
		{"PING", inbound{data: []byte(ping)}, protocol.CodeAuthRequired, "p1", false},
		{"SUBSCRIBE", inbound{data: []byte(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0}]}`)}, protocol.CodeAuthRequired, "s1", false},
		{"COMMAND", inbound{data: []byte(`{"type":"COMMAND","frameId":"c1","command":{}}`)}, protocol.CodeAuthRequired, "c1", false},
		{"ACK", inbound{data: []byte(`{"type":"ACK","frameId":"a1","cursors":[{"groupId":"grp-a","sequence":1}]}`)}, protocol.CodeAuthRequired, "a1", false},
		{"EVENT", inbound{data: []byte(`{"type":"EVENT","frameId":"e1"}`)}, protocol.CodeAuthRequired, "e1", false},
		{"malformed PING", inbound{data: []byte(`{"type":"PING"}`)}, protocol.CodeAuthRequired, "", false},
		{"frameId not an id", inbound{data: []byte(`{"type":"PING","frameId":"bad id","nonce":"` + testNonce + `"}`)}, protocol.CodeAuthRequired, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSessionKit(t)
			out, fs := k.handle(t, tc.in)
			e := onlyError(t, fs)
			if e.Error.Code != tc.code || e.InReplyTo != tc.inReplyTo || e.Error.InReplyTo != tc.inReplyTo || out.close != tc.close {
				t.Fatalf("got %s inReplyTo=%q close=%v, want %s %q %v", e.Error.Code, e.InReplyTo, out.close, tc.code, tc.inReplyTo, tc.close)
			}
			if k.s.open || len(out.subscribe) > 0 || out.submit != nil {
				t.Fatalf("a rejected frame changed the session: %+v", out)
			}
		})
	}
}

func TestSessionHello(t *testing.T) {
	type tamper func(t *testing.T, k *sessionKit) []byte
	hello := func(mut func(m map[string]any)) tamper {
		return func(t *testing.T, k *sessionKit) []byte {
			var m map[string]any
			if err := json.Unmarshal(helloFrame(t, k.key, "w1", 3, testNonce, k.fb.Now()), &m); err != nil {
				t.Fatal(err)
			}
			mut(m)
			return frame(t, m)
		}
	}
	cases := []struct {
		name string
		in   tamper
		want protocol.Code // "" means success
	}{
		{"ok", hello(func(map[string]any) {}), ""},
		{"ok among other versions", hello(func(m map[string]any) { m["protocolVersions"] = []string{"9.9", "0.1"} }), ""},
		{"no proof", hello(func(m map[string]any) { delete(m, "proof") }), protocol.CodeProtocolViolation},
		{"unknown member", hello(func(m map[string]any) { m["extra"] = 1 }), protocol.CodeProtocolViolation},
		{"server form", func(t *testing.T, k *sessionKit) []byte {
			return []byte(`{"type":"HELLO","frameId":"h1","protocolVersion":"0.1","sessionEpoch":3,"serverTime":"2026-11-30T08:00:00Z"}`)
		}, protocol.CodeProtocolViolation},
		{"nonce not in pattern", func(t *testing.T, k *sessionKit) []byte {
			return helloFrame(t, k.key, "w1", 3, "short", k.fb.Now())
		}, protocol.CodeProtocolViolation},
		{"empty versions", hello(func(m map[string]any) { m["protocolVersions"] = []string{} }), protocol.CodeProtocolViolation},
		{"shape before version", hello(func(m map[string]any) { m["protocolVersions"] = []string{"0.2"}; m["extra"] = true }), protocol.CodeProtocolViolation},
		{"unsupported version", hello(func(m map[string]any) { m["protocolVersions"] = []string{"0.2", "1.0"} }), protocol.CodeUnsupportedVersion},
		{"version before proof", func(t *testing.T, k *sessionKit) []byte {
			other, _ := protocol.GenerateKey("agent:w1#k1", nil)
			return helloFrame(t, other, "w1", 3, testNonce, k.fb.Now(), "0.2")
		}, protocol.CodeUnsupportedVersion},
		{"proof of another agent", hello(func(m map[string]any) { m["agentId"] = "w2" }), protocol.CodeAuthInvalidSignature},
		{"proof of another epoch", hello(func(m map[string]any) { m["sessionEpoch"] = 4 }), protocol.CodeAuthInvalidSignature},
		{"wrong key", func(t *testing.T, k *sessionKit) []byte {
			other, _ := protocol.GenerateKey("agent:w1#k1", nil)
			return helloFrame(t, other, "w1", 3, testNonce, k.fb.Now())
		}, protocol.CodeAuthInvalidSignature},
		{"unknown agent", func(t *testing.T, k *sessionKit) []byte {
			other, _ := protocol.GenerateKey("agent:w9#k1", nil)
			return helloFrame(t, other, "w9", 3, testNonce, k.fb.Now())
		}, protocol.CodeAuthInvalidSignature},
		{"stale proof", func(t *testing.T, k *sessionKit) []byte {
			return helloFrame(t, k.key, "w1", 3, testNonce, k.fb.Now().Add(-10*time.Minute))
		}, protocol.CodeAuthInvalidSignature},
		{"bad signature before stale epoch", func(t *testing.T, k *sessionKit) []byte {
			other, _ := protocol.GenerateKey("agent:w1#k1", nil)
			return helloFrame(t, other, "w1", 2, testNonce, k.fb.Now())
		}, protocol.CodeAuthInvalidSignature},
		{"stale session epoch", func(t *testing.T, k *sessionKit) []byte {
			return helloFrame(t, k.key, "w1", 2, testNonce, k.fb.Now())
		}, protocol.CodeAuthStaleSession},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSessionKit(t)
			out, fs := k.text(t, tc.in(t, k))
			if tc.want == "" {
				if len(fs) != 1 {
					t.Fatalf("got %d frames", len(fs))
				}
				h, ok := fs[0].(*protocol.Hello)
				if !ok || h.ProtocolVersion != ProtocolVersion || h.SessionEpoch != 3 || !h.ServerTime.Equal(k.fb.Now()) {
					t.Fatalf("HELLO reply %#v", fs[0])
				}
				if !out.opened || !k.s.open || k.s.peer != "w1" {
					t.Fatalf("session not open: %+v", k.s)
				}
				return
			}
			e := onlyError(t, fs)
			if e.Error.Code != tc.want || e.InReplyTo == "" {
				t.Fatalf("got %s (%s) inReplyTo=%q, want %s", e.Error.Code, e.Error.Message, e.InReplyTo, tc.want)
			}
			if k.s.open || out.opened || out.close {
				t.Fatal("a failed HELLO opened or closed the session")
			}
		})
	}
}

func TestSessionHelloRetryAndReuse(t *testing.T) {
	k := newSessionKit(t)
	// A failed HELLO keeps the connection: the client may try again.
	_, fs := k.text(t, helloFrame(t, k.key, "w1", 2, "nonce-aaaaaaaaaaaaaaaa", k.fb.Now()))
	if e := onlyError(t, fs); e.Error.Code != protocol.CodeAuthStaleSession {
		t.Fatalf("got %s", e.Error.Code)
	}
	k.open(t)
	// HELLO is sent once per connection.
	_, fs = k.text(t, helloFrame(t, k.key, "w1", 3, "nonce-bbbbbbbbbbbbbbbb", k.fb.Now()))
	if e := onlyError(t, fs); e.Error.Code != protocol.CodeProtocolViolation {
		t.Fatalf("second HELLO: got %s", e.Error.Code)
	}
	// A used nonce is refused on another connection.
	k2 := &sessionKit{fb: k.fb, key: k.key, s: newSession(k.fb, newFrameIDs(), 4096, slog.New(slog.DiscardHandler))}
	_, fs = k2.text(t, helloFrame(t, k.key, "w1", 3, testNonce, k.fb.Now()))
	if e := onlyError(t, fs); e.Error.Code != protocol.CodeAuthInvalidSignature {
		t.Fatalf("reused nonce: got %s", e.Error.Code)
	}
}

func TestSessionSubscribe(t *testing.T) {
	k := newSessionKit(t)
	k.open(t)
	k.fb.authorizeErr["grp-broken"] = errors.New("disk on fire")
	out, fs := k.text(t, []byte(`{"type":"SUBSCRIBE","frameId":"s1","groups":[
		{"groupId":"grp-a","afterSequence":4,"filter":{"types":["work.started"]}},
		{"groupId":"grp-nope","afterSequence":0},
		{"groupId":"grp-b","afterSequence":0},
		{"groupId":"grp-broken","afterSequence":0}]}`))
	if len(out.subscribe) != 1 || out.subscribe[0].groupID != "grp-a" || out.subscribe[0].after != 4 ||
		out.subscribe[0].frameID != "s1" || out.subscribe[0].filter.Types[0] != "work.started" {
		t.Fatalf("subscriptions %+v", out.subscribe)
	}
	if len(fs) != 3 {
		t.Fatalf("got %d errors, want 3", len(fs))
	}
	unknown, forbidden, broken := fs[0].(*protocol.ErrorFrame), fs[1].(*protocol.ErrorFrame), fs[2].(*protocol.ErrorFrame)
	// Unknown and forbidden must be indistinguishable but for the id the
	// client itself sent.
	for _, e := range []*protocol.ErrorFrame{unknown, forbidden} {
		if e.Error.Code != protocol.CodeGroupNotFound || e.InReplyTo != "s1" {
			t.Fatalf("got %+v", e.Error)
		}
	}
	if unknown.Error.Message != forbidden.Error.Message || len(unknown.Error.Details) != 1 || len(forbidden.Error.Details) != 1 ||
		unknown.Error.Details["groupId"] != "grp-nope" || forbidden.Error.Details["groupId"] != "grp-b" {
		t.Fatalf("unknown %+v and forbidden %+v differ", unknown.Error, forbidden.Error)
	}
	if broken.Error.Code != protocol.CodeInternalError || !broken.Error.Retryable || strings.Contains(broken.Error.Message, "fire") {
		t.Fatalf("a non-protocol backend error leaked or was mis-coded: %+v", broken.Error)
	}
	_, fs = k.text(t, []byte(`{"type":"SUBSCRIBE","frameId":"s2","groups":[]}`))
	if e := onlyError(t, fs); e.Error.Code != protocol.CodeProtocolViolation || e.Error.Details["schema"] != "websocket-frame" {
		t.Fatalf("empty groups: %+v", e.Error)
	}
}

func TestSessionCommand(t *testing.T) {
	k := newSessionKit(t)
	k.open(t)
	// Non-canonical member order and spacing: the Backend gets JCS bytes.
	out, fs := k.text(t, []byte(`{"frameId":"c1","type":"COMMAND","command":{ "type":"message.post", "groupId":"grp-a","actionId":"act-1","payload":{"b":1,"a":2.50} }}`))
	if len(fs) != 0 || out.submit == nil {
		t.Fatalf("command not submitted: %+v", out)
	}
	want := `{"actionId":"act-1","groupId":"grp-a","payload":{"a":2.5,"b":1},"type":"message.post"}`
	if s := out.submit; string(s.raw) != want || s.frameID != "c1" || s.actionID != "act-1" || s.groupID != "grp-a" {
		t.Fatalf("submission %+v raw %s", s, s.raw)
	}
	cases := []struct {
		name, in, inReplyTo string
	}{
		{"extra member", `{"type":"COMMAND","frameId":"c2","command":{},"x":1}`, "c2"},
		{"command not an object", `{"type":"COMMAND","frameId":"c3","command":[]}`, "c3"},
		{"no command", `{"type":"COMMAND","frameId":"c4"}`, "c4"},
		{"bad frameId", `{"type":"COMMAND","frameId":"-c5","command":{}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, fs := k.text(t, []byte(tc.in))
			if e := onlyError(t, fs); e.Error.Code != protocol.CodeProtocolViolation || e.InReplyTo != tc.inReplyTo || out.submit != nil {
				t.Fatalf("got %+v submit=%v", e, out.submit)
			}
		})
	}
}

func TestSessionAckPingAndServerFrames(t *testing.T) {
	k := newSessionKit(t)
	k.open(t)
	_, fs := k.text(t, []byte(`{"type":"ACK","frameId":"a1","cursors":[{"groupId":"grp-a","sequence":7},{"groupId":"grp-b","sequence":2}]}`))
	if len(fs) != 0 || k.fb.ackedAt("w1", "grp-a") != 7 || k.fb.ackedAt("w1", "grp-b") != 2 {
		t.Fatalf("ACK: frames %v, acked %v", fs, k.fb.acked)
	}
	_, fs = k.text(t, []byte(`{"type":"PING","frameId":"p1","nonce":"`+testNonce+`"}`))
	if p, ok := fs[0].(*protocol.Ping); len(fs) != 1 || !ok || p.Nonce != testNonce || !p.Reply || p.FrameID == "p1" {
		t.Fatalf("PING echo %#v", fs)
	}
	_, fs = k.text(t, []byte(`{"type":"PING","frameId":"p2","nonce":"`+testNonce+`","reply":true}`))
	if len(fs) != 0 {
		t.Fatalf("a PING reply was answered: %v", fs)
	}
	_, fs = k.text(t, []byte(`{"type":"ERROR","frameId":"e1","error":{"code":"INTERNAL_ERROR","message":"x","retryable":true}}`))
	if len(fs) != 0 {
		t.Fatalf("a client ERROR was answered: %v", fs)
	}
	for _, in := range []string{
		`{"type":"ACK","frameId":"a2","inReplyTo":"c1","receipt":{"actionId":"act-1","events":[]}}`,
		`{"type":"EVENT","frameId":"e2","event":{}}`,
		`{"type":"BACKPRESSURE","frameId":"b1","groupId":"grp-a","retryAfterMs":5}`,
		`{"type":"ERROR","frameId":"e3","error":{"code":"NOT_A_CODE","message":"x","retryable":true}}`,
		`{"type":"PING","frameId":"p3","nonce":"short"}`,
	} {
		_, fs = k.text(t, []byte(in))
		if e := onlyError(t, fs); e.Error.Code != protocol.CodeProtocolViolation {
			t.Fatalf("%s: got %s", in, e.Error.Code)
		}
	}
}

func TestWireError(t *testing.T) {
	pe := protocol.Errorf(protocol.CodeCursorTooOld, "old").At("/x")
	pe.Details = map[string]any{"snapshot": "s"}
	pe.ActionID = "act-own"
	cases := []struct {
		name      string
		err       error
		inReplyTo string
		actionID  string
		want      protocol.Error
	}{
		{"plain error", errors.New("secret"), "f1", "", protocol.Error{Code: protocol.CodeInternalError, Message: "internal error", Retryable: true, InReplyTo: "f1"}},
		{"unknown code", &protocol.Error{Code: "NOPE", Message: "m"}, "", "", protocol.Error{Code: protocol.CodeInternalError, Message: "internal error", Retryable: true}},
		{"retryable fixed", &protocol.Error{Code: protocol.CodeRevisionConflict, Message: "m", Retryable: true}, "bad id", "-bad", protocol.Error{Code: protocol.CodeRevisionConflict, Message: "m"}},
		{"pointer to details", pe, "f2", "", protocol.Error{Code: protocol.CodeCursorTooOld, Message: "old", InReplyTo: "f2", ActionID: "act-own", Details: map[string]any{"snapshot": "s", "pointer": "/x"}}},
		{"actionId given", pe, "", "act-2", protocol.Error{Code: protocol.CodeCursorTooOld, Message: "old", ActionID: "act-2", Details: map[string]any{"snapshot": "s", "pointer": "/x"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := WireError(tc.err, tc.inReplyTo, tc.actionID)
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(&tc.want)
			if !bytes.Equal(a, b) {
				t.Fatalf("got %s\nwant %s", a, b)
			}
			checkFrame(t, encodeError("s1", got))
		})
	}
	if len(pe.Details) != 1 || pe.Pointer != "/x" {
		t.Fatal("WireError modified its argument")
	}
}
