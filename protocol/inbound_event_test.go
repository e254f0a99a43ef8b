package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// referenceEventFrame is the straightforward path InboundEventFrame must
// agree with: exact typed decode of the frame from its bytes, Verify, then
// the event's canonical bytes.
func referenceEventFrame(raw []byte, parsed any, keys KeyResolver) (*EventFrame, []byte, error) {
	f, err := DecodeFrameParsed(raw, parsed)
	if err != nil {
		return nil, nil, err
	}
	ef, ok := f.(*EventFrame)
	if !ok {
		return nil, nil, Errorf(CodeProtocolViolation, "not an EVENT frame")
	}
	doc := parsed.(map[string]any)["event"].(map[string]any)
	if keys != nil {
		if err := Verify(doc, keys); err != nil {
			return nil, nil, err
		}
	}
	if err := ValidateEventAt(doc, "/event"); err != nil {
		return nil, nil, err
	}
	canon, err := Canonical(doc)
	if err != nil {
		return nil, nil, err
	}
	return ef, canon, nil
}

// testEventFrame is a signed work.cancelled EVENT frame around payload.
func testEventFrame(t testing.TB, k PrivateKey, payload string) []byte {
	t.Helper()
	return testEventFrameOf(t, k, EvtWorkCancelled, AggregateWorkItem, payload)
}

func testEventFrameOf(t testing.TB, k PrivateKey, typ EventType, kind AggregateKind, payload string) []byte {
	t.Helper()
	ev := &Event{EventID: "evt-1", GroupID: "grp-1", Sequence: Uint64(7),
		Aggregate: &Aggregate{Kind: kind, ID: "wi-1"}, Revision: Uint64(2),
		Type: typ, Actor: Actor{Kind: ActorService, ID: "authority-1"},
		CausationID: "act-1", CorrelationID: "m-1", OccurredAt: NewTime(testNow),
		AcceptedBy: "authority-1", Payload: json.RawMessage(payload)}
	signed, err := SignedEvent(ev, k)
	if err != nil {
		t.Fatal(err)
	}
	// As the wire carries it: not canonical, members in another order.
	return []byte(`{"type":"EVENT","frameId":"f-1","event":` + string(signed) + `}`)
}

// agreeEvent runs both paths and fails unless they give the same frame, bytes
// and error (code and pointer).
func agreeEvent(t *testing.T, raw []byte, keys KeyResolver) error {
	t.Helper()
	parsed, err := Parse(raw, DecodeOptions{MaxDepth: 32})
	if err != nil {
		return err
	}
	if _, err := DecodeFrameType(parsed); err != nil {
		return err
	}
	if parsed.(map[string]any)["type"] != string(FrameEvent) {
		return nil
	}
	wantF, wantC, wantErr := referenceEventFrame(raw, parsed, keys)
	gotF, gotC, gotErr := InboundEventFrame(parsed, keys)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s\nreference error %v, fast path error %v", raw, wantErr, gotErr)
	}
	if wantErr != nil {
		w, g := wantErr.(*Error), gotErr.(*Error)
		if w.Code != g.Code || w.Pointer != g.Pointer {
			t.Fatalf("%s\nreference %s at %q (%v), fast path %s at %q (%v)", raw, w.Code, w.Pointer, w, g.Code, g.Pointer, g)
		}
		return gotErr
	}
	if !bytes.Equal(wantC, gotC) {
		t.Fatalf("canonical bytes differ:\n%s\n%s", wantC, gotC)
	}
	// The reference keeps the payload's bytes as received; the fast path
	// keeps its canonical form. Same value.
	if wantF.Event.Payload != nil {
		var err error
		if wantF.Event.Payload, err = CanonicalBytes(wantF.Event.Payload, DecodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(wantF, gotF) {
		t.Fatalf("frames differ:\n%+v\n%+v", *wantF.Event, *gotF.Event)
	}
	return nil
}

func TestInboundEventFrameAgrees(t *testing.T) {
	k := testKey(t, "authority:authority-1#k1", 3)
	other := testKey(t, "authority:authority-1#k1", 4)
	keys := NewKeySet(k.Public())
	good := string(testEventFrame(t, k, `{"workItemId":"wi-1","state":"cancelled","reason":"superseded: é\u2028"}`))
	cases := []struct {
		name string
		raw  string
		keys KeyResolver
		code Code // "" means accepted
	}{
		{"signed", good, keys, ""},
		{"unverified", good, nil, ""},
		{"null payload", string(testEventFrame(t, k, `null`)), keys, CodeSchemaValidationFailed},
		{"payload not its type", string(testEventFrame(t, k, `{"anything":"goes"}`)), keys, CodeSchemaValidationFailed},
		{"aggregate kind not its type", string(testEventFrameOf(t, k, EvtWorkCancelled, AggregateMission, `{"workItemId":"wi-1","state":"cancelled"}`)), keys, CodeSchemaValidationFailed},
		{"unknown ext type, free payload", string(testEventFrameOf(t, k, "ext.acme.review.requested", AggregateWorkItem, `{"anything":"goes"}`)), keys, ""},
		{"wrong key", string(testEventFrame(t, other, `{}`)), keys, CodeAuthInvalidSignature},
		{"tampered payload", strings.Replace(good, `"wi-1"`, `"wi-2"`, 1), keys, CodeAuthInvalidSignature},
		{"unknown member", strings.Replace(good, `"eventId"`, `"extra":1,"eventId"`, 1), keys, CodeProtocolViolation},
		{"null member", strings.Replace(good, `"groupId":"grp-1"`, `"groupId":null`, 1), keys, CodeProtocolViolation},
		{"wrong kind", strings.Replace(good, `"sequence":7`, `"sequence":"7"`, 1), keys, CodeProtocolViolation},
		{"negative sequence", strings.Replace(good, `"sequence":7`, `"sequence":-7`, 1), keys, CodeProtocolViolation},
		{"bad time", strings.Replace(good, `"occurredAt":"`, `"occurredAt":"x`, 1), keys, CodeProtocolViolation},
		{"huge integer", strings.Replace(good, `"sequence":7`, `"sequence":90071992547409930`, 1), keys, CodeProtocolViolation},
		{"no frameId", strings.Replace(good, `"frameId":"f-1",`, ``, 1), keys, CodeProtocolViolation},
		{"no event", `{"type":"EVENT","frameId":"f-1"}`, keys, CodeProtocolViolation},
		{"event not object", `{"type":"EVENT","frameId":"f-1","event":[]}`, keys, CodeProtocolViolation},
		{"no signature", `{"type":"EVENT","frameId":"f-1","event":{"eventId":"e"}}`, keys, CodeAuthInvalidSignature},
		{"no signature unverified", `{"type":"EVENT","frameId":"f-1","event":{"eventId":"e","payload":{"a":[1,2]}}}`, nil, CodeSchemaValidationFailed},
		{"value only", `{"type":"EVENT","frameId":"f-1","event":{"eventId":"e","payload":{},"signature":{"value":"x"}}}`, nil, CodeSchemaValidationFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := agreeEvent(t, []byte(tc.raw), tc.keys)
			if got := CodeOf(err); (err == nil) != (tc.code == "") || (err != nil && got != tc.code) {
				t.Fatalf("got %v, want code %q", err, tc.code)
			}
		})
	}
}

// FuzzInboundEventFrame: the one-pass decoder never panics and agrees with
// the reference path (typed decode from bytes, Verify, Canonical) on every
// input: same result, same error code and pointer.
func FuzzInboundEventFrame(f *testing.F) {
	k := testKey(f, "authority:authority-1#k1", 3)
	keys := NewKeySet(k.Public())
	f.Add(testEventFrame(f, k, `{"workItemId":"wi-1","state":"cancelled","reason":"superseded"}`), true)
	f.Add(testEventFrame(f, k, `{"workItemId":"wi-1","n":[1,2.5,true,null]}`), true)
	f.Add(testEventFrame(f, k, `"text"`), false)
	f.Add([]byte(`{"type":"EVENT","frameId":"f","event":{"signature":{"alg":"Ed25519","value":"v","zz":1}}}`), false)
	f.Fuzz(func(t *testing.T, raw []byte, verify bool) {
		var r KeyResolver
		if verify {
			r = keys
		}
		agreeEvent(t, raw, r)
	})
}

func BenchmarkInboundEvent(b *testing.B) {
	k := testKey(b, "authority:authority-1#k1", 3)
	keys := NewKeySet(k.Public())
	raw := testEventFrameOf(b, k, EvtWorkOfferAccepted, AggregateWorkItem, benchOfferAcceptedPayload)
	parsed, err := Parse(raw, DecodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	doc := parsed.(map[string]any)["event"].(map[string]any)
	in, _ := SigningInput(doc)
	sig, _ := b64.DecodeString(doc["signature"].(map[string]any)["value"].(string))
	var verifyDur, refDur, fastDur float64
	for range b.N {
		start := time.Now()
		if !ed25519.Verify(k.Public().Key, in, sig) {
			b.Fatal("verify")
		}
		verifyDur += time.Since(start).Seconds()
		start = time.Now()
		if _, _, err := referenceEventFrame(raw, parsed, keys); err != nil {
			b.Fatal(err)
		}
		refDur += time.Since(start).Seconds()
		start = time.Now()
		if _, _, err := InboundEventFrame(parsed, keys); err != nil {
			b.Fatal(err)
		}
		fastDur += time.Since(start).Seconds()
	}
	b.ReportMetric(fastDur/verifyDur, "fast/verify-only")
	b.ReportMetric(refDur/verifyDur, "reference/verify-only")
}
