package wss

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// FuzzSession feeds arbitrary messages to the connection state machine,
// before and after HELLO. It must never panic, and everything it sends
// must be a valid frame: before HELLO only ERROR or the HELLO reply, a
// close only after exactly one ERROR, and a command handed on only as JCS
// bytes.
func FuzzSession(f *testing.F) {
	k := newSessionKit(f)
	seeds := []string{
		string(helloFrame(f, k.key, "w1", 3, "nonce-fuzz-0000000000", k.fb.Now())),
		`{"type":"HELLO","frameId":"h1","protocolVersions":["0.2"],"agentId":"w1","sessionEpoch":3,"proof":{}}`,
		`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0,"filter":{"types":["work.started"]}},{"groupId":"grp-b","afterSequence":1}]}`,
		`{"type":"COMMAND","frameId":"c1","command":{"actionId":"act-1","groupId":"grp-a","payload":{"x":1e2}}}`,
		`{"type":"ACK","frameId":"a1","cursors":[{"groupId":"grp-a","sequence":7}]}`,
		`{"type":"ACK","frameId":"a2","inReplyTo":"c1","receipt":{"actionId":"a","events":[]}}`,
		`{"type":"PING","frameId":"p1","nonce":"` + testNonce + `"}`,
		`{"type":"PING","frameId":"p1","nonce":"` + testNonce + `","reply":true}`,
		`{"type":"ERROR","frameId":"e1","error":{"code":"INTERNAL_ERROR","message":"x","retryable":true}}`,
		`{"type":"EVENT","frameId":"e1","event":{}}`,
		`{"type":"BACKPRESSURE","frameId":"b1","groupId":"grp-a","retryAfterMs":1}`,
		`{"type":"PING","type":"PING"}`, `{"frameId":"\ud800"}`, `[]`, `"x"`, `{`, "\xef\xbb\xbf{}",
	}
	for _, s := range seeds {
		for flags := range byte(4) {
			f.Add(flags, []byte(s))
		}
	}
	k.open(f)
	f.Fuzz(func(t *testing.T, flags byte, data []byte) {
		m := inbound{binary: flags&1 != 0, oversize: flags&2 != 0, data: data}
		fresh := newSession(k.fb, newFrameIDs(), 4096, slog.New(slog.DiscardHandler))
		for i, s := range []*session{fresh, k.s} {
			wasOpen := s.open
			out := s.handle(context.Background(), m)
			for _, b := range out.send {
				if err := frameProblem(b); err != nil {
					t.Fatalf("invalid frame %s: %v", b, err)
				}
				if !wasOpen {
					if tp, _ := protocol.DecodeFrameType(mustParse(t, b)); tp != protocol.FrameError && tp != protocol.FrameHello {
						t.Fatalf("%s sent before HELLO", tp)
					}
				}
			}
			if out.close && (len(out.send) != 1 || !m.oversize) {
				t.Fatalf("close with %d frames", len(out.send))
			}
			if !s.open && (len(out.subscribe) > 0 || out.submit != nil) {
				t.Fatal("work started before HELLO")
			}
			if out.submit != nil {
				canon, err := protocol.CanonicalBytes(out.submit.raw, protocol.DecodeOptions{})
				if err != nil || !bytes.Equal(canon, out.submit.raw) {
					t.Fatalf("submitted bytes are not JCS: %s", out.submit.raw)
				}
			}
			if i == 1 && !s.open {
				t.Fatal("the open session closed")
			}
		}
	})
}

func mustParse(t *testing.T, b []byte) any {
	v, err := protocol.Parse(b, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
