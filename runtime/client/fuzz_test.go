package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestDecodeInbound(t *testing.T) {
	ev := signedEvent(t, "grp-a", 1, authorityKey)
	forged := signedEvent(t, "grp-a", 1, otherKey)
	tests := []struct {
		name string
		raw  string
		typ  protocol.FrameType
		code protocol.Code // "" = accepted
	}{
		{"event", `{"type":"EVENT","frameId":"s1","event":` + string(ev) + `}`, protocol.FrameEvent, ""},
		{"event, bad signature", `{"type":"EVENT","frameId":"s1","event":` + string(forged) + `}`, "", protocol.CodeAuthInvalidSignature},
		{"event not an object", `{"type":"EVENT","frameId":"s1","event":[]}`, "", protocol.CodeProtocolViolation},
		{"hello reply", `{"type":"HELLO","frameId":"s1","protocolVersion":"0.1","sessionEpoch":2,"serverTime":"2026-11-30T08:00:00Z"}`, protocol.FrameHello, ""},
		{"client hello from the server", `{"type":"HELLO","frameId":"s1","protocolVersions":["0.1"],"agentId":"a","sessionEpoch":1,"proof":{"agentId":"a","sessionEpoch":1,"nonce":"nnnnnnnnnnnnnnnnnnnn","issuedAt":"2026-11-30T08:00:00Z","signature":{"alg":"Ed25519","keyId":"k","createdAt":"2026-11-30T08:00:00Z","value":"x"}}}`, "", protocol.CodeProtocolViolation},
		{"receipt", `{"type":"ACK","frameId":"s1","inReplyTo":"f1","receipt":{"actionId":"act-1","events":[]}}`, protocol.FrameAck, ""},
		{"cursor ACK from the server", `{"type":"ACK","frameId":"s1","cursors":[]}`, "", protocol.CodeProtocolViolation},
		{"ping", `{"type":"PING","frameId":"s1","nonce":"nnnnnnnnnnnnnnnnnnnn"}`, protocol.FramePing, ""},
		{"error", `{"type":"ERROR","frameId":"s1","error":{"code":"GROUP_NOT_FOUND","message":"m","retryable":false}}`, protocol.FrameError, ""},
		{"backpressure", `{"type":"BACKPRESSURE","frameId":"s1","groupId":"g","retryAfterMs":5}`, protocol.FrameBackpressure, ""},
		{"hello reply with the agent's groups", `{"type":"HELLO","frameId":"s1","protocolVersion":"0.1","sessionEpoch":2,"serverTime":"2026-11-30T08:00:00Z","groups":["grp-a"]}`, protocol.FrameHello, ""},
		{"groups", `{"type":"GROUPS","frameId":"s1","groups":["grp-a","grp-b"]}`, protocol.FrameGroups, ""},
		{"groups, not a list", `{"type":"GROUPS","frameId":"s1","groups":"grp-a"}`, "", protocol.CodeProtocolViolation},
		{"groups, unknown member", `{"type":"GROUPS","frameId":"s1","groups":[],"x":1}`, "", protocol.CodeProtocolViolation},
		{"subscribe from the server", `{"type":"SUBSCRIBE","frameId":"s1","groups":[]}`, "", protocol.CodeProtocolViolation},
		{"duplicate member", `{"type":"PING","type":"PING","frameId":"s1","nonce":"n"}`, "", protocol.CodeProtocolViolation},
		{"unknown frame", `{"type":"NOPE","frameId":"s1"}`, "", protocol.CodeProtocolViolation},
		{"not json", `nope`, "", protocol.CodeProtocolViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := decodeInbound([]byte(tt.raw), protocol.DecodeOptions{}, authorityKeys())
			if tt.code != "" {
				if protocol.CodeOf(err) != tt.code {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil || in.typ != tt.typ {
				t.Fatalf("decodeInbound = %+v, %v", in, err)
			}
			if in.typ == protocol.FrameEvent && string(in.event.Raw) != string(ev) {
				t.Fatalf("event bytes %s, want the canonical signed event", in.event.Raw)
			}
		})
	}
}

// testSession is a session without a socket: frames it writes are captured.
func testSession(t testing.TB, store Store) (*session, *[][]byte) {
	t.Helper()
	c, err := New(Config{
		URL: "ws://127.0.0.1:1/mwp", AllowInsecureLoopback: true, AgentID: agentID, Key: agentKey, Store: store,
		AuthorityKeys: authorityKeys(), Logger: quietLogger(t),
		FetchSnapshot: func(context.Context, protocol.SnapshotRef) ([]byte, error) { return nil, errors.New("offline") },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out [][]byte
	s := &session{
		c: c, ctx: ctx, q: newCmdQueue(), fcancel: cancel, rcancel: func() {},
		in: make(chan readItem, 8), stop: make(chan struct{}),
		send: func(_ context.Context, b []byte) error { out = append(out, b); return nil },
		gaps: newGapTracker(c.cfg.GapTimeout), subs: map[string]string{"f-sub": "grp-a"},
		subscribed: map[string]bool{"grp-a": true}, restoring: map[string]bool{}, snaps: make(chan snapResult),
	}
	s.ping = newPinger(c.cfg.PingInterval, c.cfg.PingTimeout, c.cfg.Clock.Now())
	p := &pendingCmd{actionID: "act-1", groupID: "grp-a", signed: signedCommand(t, "act-1", "grp-a"), waiters: []chan cmdResult{make(chan cmdResult, 1)}}
	s.q.add(p)
	s.q.sent(p, "f-1")
	return s, &out
}

// FuzzInboundFrame feeds arbitrary authority frames through decoding and the
// session's handling with a real store: never a panic, and every ACK the
// client writes stays at or below the store's durable cursors.
func FuzzInboundFrame(f *testing.F) {
	ev1 := signedEvent(f, "grp-a", 1, authorityKey)
	ev2 := signedEvent(f, "grp-a", 2, authorityKey)
	_, ref := snapshotOf(f, "grp-a", 5, authorityKey)
	refJSON, _ := json.Marshal(ref)
	for _, s := range []string{
		`{"type":"EVENT","frameId":"s1","event":` + string(ev1) + `}`,
		`{"type":"EVENT","frameId":"s2","event":` + string(ev2) + `}`,
		`{"type":"ACK","frameId":"s3","inReplyTo":"f-1","receipt":{"actionId":"act-1","events":[]}}`,
		`{"type":"ACK","frameId":"s3","inReplyTo":"f-1","receipt":{"actionId":"act-2","events":[]}}`,
		`{"type":"ERROR","frameId":"s4","inReplyTo":"f-1","error":{"code":"RATE_LIMITED","message":"m","retryable":true,"details":{"retryAfterMs":1e300}}}`,
		`{"type":"ERROR","frameId":"s4","inReplyTo":"f-1","error":{"code":"AUTH_STALE_SESSION","message":"m","retryable":false}}`,
		`{"type":"ERROR","frameId":"s5","inReplyTo":"f-sub","error":{"code":"CURSOR_TOO_OLD","message":"m","retryable":false,"details":{"snapshot":` + string(refJSON) + `}}}`,
		`{"type":"ERROR","frameId":"s5","error":{"code":"GROUP_NOT_FOUND","message":"m","retryable":false,"details":{"groupId":"grp-a"}}}`,
		`{"type":"PING","frameId":"s6","nonce":"nnnnnnnnnnnnnnnnnnnn"}`,
		`{"type":"PING","frameId":"s6","nonce":"nnnnnnnnnnnnnnnnnnnn","reply":true}`,
		`{"type":"BACKPRESSURE","frameId":"s7","groupId":"grp-a","retryAfterMs":18446744073709551615}`,
		`{"type":"HELLO","frameId":"s8","protocolVersion":"0.1","sessionEpoch":2,"serverTime":"2026-11-30T08:00:00Z"}`,
		`{"type":"GROUPS","frameId":"s9","groups":["grp-a","grp-new"]}`,
		`[]`, `{"type":"EVENT"}`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	store := openStore(f, f.TempDir())
	f.Cleanup(func() { store.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		s, out := testSession(t, store)
		defer func() {
			close(s.stop)
			s.fcancel()
			s.wg.Wait()
		}()
		in, err := decodeInbound(data, protocol.DecodeOptions{MaxBytes: s.c.cfg.MaxFrameBytes}, s.c.cfg.AuthorityKeys)
		if err != nil {
			if protocol.CodeOf(err) == protocol.CodeInternalError {
				t.Fatalf("decode failure without a protocol code: %v", err)
			}
			return
		}
		if s.onItem(readItem{f: in}) == nil {
			_ = s.finish()
		}
		for _, b := range *out {
			var a protocol.AckFrame
			if json.Unmarshal(b, &a) != nil || a.Type != protocol.FrameAck {
				continue
			}
			for _, c := range a.Cursors {
				if c.Sequence > store.Cursor(c.GroupID) {
					t.Fatalf("ACK %+v ahead of the durable cursor %d", c, store.Cursor(c.GroupID))
				}
			}
		}
	})
}
