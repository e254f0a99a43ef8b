package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const (
	typesCmdJSON = `{"actionId":"act-1","protocolVersion":"0.1","actor":{"kind":"agent","id":"worker-1"},` +
		`"type":"work.start","groupId":"grp-a","sessionEpoch":3,"membershipEpoch":1,"correlationId":"mis-a",` +
		`"issuedAt":"2026-11-30T08:00:00Z","payload":{"workItemId":"wi-7","ownershipEpoch":2},` +
		`"signature":{"alg":"Ed25519","keyId":"agent:worker-1#k1","createdAt":"2026-11-30T08:00:00Z","value":"c2ln"}}`
	typesEvtJSON = `{"eventId":"evt-1","groupId":"grp-a","sequence":1,"aggregate":{"kind":"workItem","id":"wi-7"},` +
		`"revision":1,"type":"work.started","actor":{"kind":"agent","id":"worker-1"},"causationId":"act-1",` +
		`"correlationId":"mis-a","occurredAt":"2026-11-30T08:00:00.120Z","acceptedBy":"authority-1","payload":{},` +
		`"signature":{"alg":"Ed25519","keyId":"authority-1#k1","createdAt":"2026-11-30T08:00:00.120Z","value":"c2ln"}}`
	typesProofJSON = `{"agentId":"worker-1","sessionEpoch":3,"nonce":"n0nce-abcdefghijkl","issuedAt":"2026-11-30T08:00:00Z",` +
		`"signature":{"alg":"Ed25519","keyId":"agent:worker-1#k1","createdAt":"2026-11-30T08:00:00Z","value":"c2ln"}}`
)

func TestDecodeFrameEachType(t *testing.T) {
	sig := func(key string, at Time) Signature {
		return Signature{Alg: "Ed25519", KeyID: key, CreatedAt: at, Value: "c2ln"}
	}
	t0 := typesAt(0)
	cmd := &Command{
		ActionID: "act-1", ProtocolVersion: "0.1", Actor: Actor{Kind: ActorAgent, ID: "worker-1"}, Type: CmdWorkStart,
		GroupID: "grp-a", SessionEpoch: Uint64(3), MembershipEpoch: Uint64(1), CorrelationID: "mis-a", IssuedAt: t0,
		Payload: json.RawMessage(`{"workItemId":"wi-7","ownershipEpoch":2}`), Signature: sig("agent:worker-1#k1", t0),
	}
	evt := &Event{
		EventID: "evt-1", GroupID: "grp-a", Sequence: Uint64(1), Aggregate: &Aggregate{Kind: AggregateWorkItem, ID: "wi-7"},
		Revision: Uint64(1), Type: EvtWorkStarted, Actor: Actor{Kind: ActorAgent, ID: "worker-1"}, CausationID: "act-1",
		CorrelationID: "mis-a", OccurredAt: typesAt(120e6), AcceptedBy: "authority-1", Payload: json.RawMessage(`{}`),
		Signature: sig("authority-1#k1", typesAt(120e6)),
	}
	for _, tc := range []struct {
		name string
		in   string
		want any
	}{
		{"hello client", `{"type":"HELLO","frameId":"f-1","protocolVersions":["0.1"],"agentId":"worker-1","sessionEpoch":3,"proof":` + typesProofJSON + `}`,
			&Hello{Type: FrameHello, FrameID: "f-1", ProtocolVersions: []string{"0.1"}, AgentID: "worker-1", SessionEpoch: 3,
				Proof: &HelloProof{AgentID: "worker-1", SessionEpoch: 3, Nonce: "n0nce-abcdefghijkl", IssuedAt: t0, Signature: sig("agent:worker-1#k1", t0)}}},
		{"hello server", `{"type":"HELLO","frameId":"s-1","protocolVersion":"0.1","sessionEpoch":3,"serverTime":"2026-11-30T08:00:00Z"}`,
			&Hello{Type: FrameHello, FrameID: "s-1", ProtocolVersion: "0.1", SessionEpoch: 3, ServerTime: &t0}},
		{"subscribe", `{"type":"SUBSCRIBE","frameId":"f-2","groups":[{"groupId":"grp-a","afterSequence":0},{"groupId":"grp-b","afterSequence":9,"filter":{"workItemIds":["wi-7"]}}]}`,
			&Subscribe{Type: FrameSubscribe, FrameID: "f-2", Groups: List[GroupPosition]{
				{GroupID: "grp-a"}, {GroupID: "grp-b", AfterSequence: 9, Filter: &SubscribeFilter{WorkItemIDs: []string{"wi-7"}}}}}},
		{"command", `{"type":"COMMAND","frameId":"f-3","command":` + typesCmdJSON + `}`,
			&CommandFrame{Type: FrameCommand, FrameID: "f-3", Command: cmd}},
		{"event", `{"type":"EVENT","frameId":"s-2","event":` + typesEvtJSON + `}`,
			&EventFrame{Type: FrameEvent, FrameID: "s-2", Event: evt}},
		{"ack receipt", `{"type":"ACK","frameId":"s-3","inReplyTo":"f-3","receipt":{"actionId":"act-1","events":[{"eventId":"evt-1","groupId":"grp-a","sequence":1}]}}`,
			&AckFrame{Type: FrameAck, FrameID: "s-3", InReplyTo: "f-3", Receipt: &Receipt{ActionID: "act-1",
				Events: List[EventRef]{{EventID: "evt-1", GroupID: "grp-a", Sequence: Uint64(1)}}}}},
		{"ack cursors", `{"type":"ACK","frameId":"f-4","cursors":[{"groupId":"grp-a","sequence":1},{"groupId":"grp-b","sequence":0}]}`,
			&AckFrame{Type: FrameAck, FrameID: "f-4", Cursors: []Cursor{{GroupID: "grp-a", Sequence: 1}, {GroupID: "grp-b"}}}},
		{"ping with presence", `{"type":"PING","frameId":"f-5","nonce":"n0nce-abcdefghijkl","presence":{"agentId":"worker-1","sessionEpoch":3,"capacityState":"available","maxConcurrency":2,"activeSlots":0,"queuedWorkItems":0,"observedAt":"2026-11-30T08:00:00Z"}}`,
			&Ping{Type: FramePing, FrameID: "f-5", Nonce: "n0nce-abcdefghijkl", Presence: &PresenceRecord{
				AgentID: "worker-1", SessionEpoch: 3, CapacityState: CapacityAvailable, MaxConcurrency: 2, ObservedAt: t0}}},
		{"ping reply", `{"type":"PING","frameId":"s-4","nonce":"n0nce-abcdefghijkl","reply":true}`,
			&Ping{Type: FramePing, FrameID: "s-4", Nonce: "n0nce-abcdefghijkl", Reply: true}},
		{"error", `{"type":"ERROR","frameId":"s-5","inReplyTo":"f-3","error":{"code":"WORK_LEASE_EXPIRED","message":"lease l-1 expired","retryable":false,"actionId":"act-1"}}`,
			&ErrorFrame{Type: FrameError, FrameID: "s-5", InReplyTo: "f-3", Error: &Error{
				Code: CodeWorkLeaseExpired, Message: "lease l-1 expired", ActionID: "act-1"}}},
		{"backpressure", `{"type":"BACKPRESSURE","frameId":"s-6","groupId":"grp-a","retryAfterMs":500}`,
			&Backpressure{Type: FrameBackpressure, FrameID: "s-6", GroupID: "grp-a", RetryAfterMs: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeFrame([]byte(tc.in))
			if err != nil {
				t.Fatalf("DecodeFrame: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
			parsed, err := Parse([]byte(tc.in), DecodeOptions{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			viaParsed, err := DecodeFrameParsed([]byte(tc.in), parsed)
			if err != nil || !reflect.DeepEqual(viaParsed, tc.want) {
				t.Fatalf("DecodeFrameParsed = %#v, %v", viaParsed, err)
			}
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(typesSemantic(t, out), typesSemantic(t, []byte(tc.in))) {
				t.Fatalf("re-marshal differs:\n%s\n%s", out, tc.in)
			}
		})
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	cmdWith := func(old, repl string) string {
		return `{"type":"COMMAND","frameId":"f-3","command":` + strings.Replace(typesCmdJSON, old, repl, 1) + `}`
	}
	for _, tc := range []struct {
		name    string
		in      string
		pointer string
	}{
		{"not an object", `["PING"]`, ""},
		{"not JSON", `{"type":"PING"`, ""},
		{"trailing value", `{"type":"PING","frameId":"f","nonce":"n"} {}`, ""},
		{"no type", `{"frameId":"f"}`, "/type"},
		{"type not a string", `{"type":7,"frameId":"f"}`, "/type"},
		{"unknown type", `{"type":"STREAM","frameId":"f"}`, "/type"},
		{"lower-case type", `{"type":"ping","frameId":"f","nonce":"n"}`, "/type"},
		{"unknown member", `{"type":"PING","frameId":"f","nonce":"n","extra":1}`, "/extra"},
		{"member of another frame", `{"type":"PING","frameId":"f","nonce":"n","groupId":"g"}`, "/groupId"},
		{"member in wrong case", `{"type":"PING","frameID":"f","nonce":"n"}`, "/frameID"},
		{"type member in wrong case", `{"type":"PING","Type":"PING","frameId":"f","nonce":"n"}`, "/Type"},
		{"null member", `{"type":"PING","frameId":"f","nonce":null}`, "/nonce"},
		{"null optional member", `{"type":"PING","frameId":"f","nonce":"n","presence":null}`, "/presence"},
		{"wrong kind", `{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":"500"}`, "/retryAfterMs"},
		{"negative uint", `{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":-1}`, "/retryAfterMs"},
		{"fractional uint", `{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":1.5}`, "/retryAfterMs"},
		{"exponent uint", `{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":1e3}`, "/retryAfterMs"},
		{"uint beyond uint64", `{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":18446744073709551616}`, ""},
		{"missing frameId", `{"type":"PING","nonce":"n"}`, "/frameId"},
		{"empty frameId", `{"type":"PING","frameId":"","nonce":"n"}`, "/frameId"},
		{"ping without nonce", `{"type":"PING","frameId":"f"}`, "/nonce"},
		{"command frame without command", `{"type":"COMMAND","frameId":"f"}`, "/command"},
		{"event frame without event", `{"type":"EVENT","frameId":"f"}`, "/event"},
		{"error frame without error", `{"type":"ERROR","frameId":"f"}`, "/error"},
		{"subscribe without groups", `{"type":"SUBSCRIBE","frameId":"f"}`, "/groups"},
		{"backpressure without group", `{"type":"BACKPRESSURE","frameId":"f","retryAfterMs":5}`, "/groupId"},
		{"empty hello", `{"type":"HELLO","frameId":"f","sessionEpoch":1}`, "/proof"},
		{"hello without proof", `{"type":"HELLO","frameId":"f","protocolVersions":["0.1"],"agentId":"w","sessionEpoch":1}`, "/proof"},
		{"hello without versions", `{"type":"HELLO","frameId":"f","agentId":"w","sessionEpoch":1,"proof":` + typesProofJSON + `}`, "/protocolVersions"},
		{"hello mixing forms", `{"type":"HELLO","frameId":"f","protocolVersions":["0.1"],"agentId":"w","sessionEpoch":1,"proof":` + typesProofJSON + `,"protocolVersion":"0.1"}`, ""},
		{"server hello without time", `{"type":"HELLO","frameId":"f","protocolVersion":"0.1","sessionEpoch":1}`, ""},
		{"ack without cursors or receipt", `{"type":"ACK","frameId":"f"}`, "/cursors"},
		{"ack mixing forms", `{"type":"ACK","frameId":"f","inReplyTo":"c","receipt":{"actionId":"a","events":[]},"cursors":[]}`, ""},
		{"ack receipt without inReplyTo", `{"type":"ACK","frameId":"f","receipt":{"actionId":"a","events":[]}}`, ""},
		{"nested unknown member", cmdWith(`"correlationId"`, `"correlationID"`), "/command/correlationID"},
		{"nested signature member", cmdWith(`"value":"c2ln"`, `"value":"c2ln","extra":true`), "/command/signature/extra"},
		{"nested null epoch", cmdWith(`"sessionEpoch":3`, `"sessionEpoch":null`), "/command/sessionEpoch"},
		{"offset time", cmdWith(`"issuedAt":"2026-11-30T08:00:00Z"`, `"issuedAt":"2026-11-30T09:00:00+01:00"`), "/command/issuedAt"},
		{"nanosecond time", cmdWith(`"issuedAt":"2026-11-30T08:00:00Z"`, `"issuedAt":"2026-11-30T08:00:00.000000001Z"`), "/command/issuedAt"},
		{"numeric time", cmdWith(`"issuedAt":"2026-11-30T08:00:00Z"`, `"issuedAt":1764489600`), "/command/issuedAt"},
		{"signature time", cmdWith(`"createdAt":"2026-11-30T08:00:00Z"`, `"createdAt":"2026-02-30T08:00:00Z"`), "/command/signature/createdAt"},
		{"extension entry member", cmdWith(`"payload":`, `"extensions":{"urn:x":{"critical":true,"data":{},"why":1}},"payload":`), "/command/extensions/urn:x/why"},
		{"extension entry not an object", cmdWith(`"payload":`, `"extensions":{"urn:x/y~z":[]},"payload":`), "/command/extensions/urn:x~1y~0z"},
		{"receipt event member", `{"type":"ACK","frameId":"f","inReplyTo":"c","receipt":{"actionId":"a","events":[{"eventId":"e","seq":1}]}}`, "/receipt/events/0/seq"},
		{"error frame with pointer member", `{"type":"ERROR","frameId":"f","error":{"code":"INTERNAL_ERROR","message":"m","retryable":true,"pointer":"/x"}}`, "/error/pointer"},
		{"filter member", `{"type":"SUBSCRIBE","frameId":"f","groups":[{"groupId":"g","afterSequence":0,"filter":{"kinds":["x"]}}]}`, "/groups/0/filter/kinds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := DecodeFrame([]byte(tc.in))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeFrame = %#v, %v; want a *Error", frame, err)
			}
			if pe.Code != CodeProtocolViolation || pe.Retryable {
				t.Fatalf("code %s retryable %v, want PROTOCOL_VIOLATION", pe.Code, pe.Retryable)
			}
			if tc.pointer != "" && pe.Pointer != tc.pointer {
				t.Fatalf("pointer %q, want %q (%v)", pe.Pointer, tc.pointer, pe)
			}
		})
	}
}

func TestDecodeFrameType(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want FrameType
		ok   bool
	}{
		{map[string]any{"type": "HELLO"}, FrameHello, true},
		{map[string]any{"type": "BACKPRESSURE", "x": 1}, FrameBackpressure, true},
		{map[string]any{"type": "hello"}, "", false},
		{map[string]any{"type": ""}, "", false},
		{map[string]any{"type": nil}, "", false},
		{map[string]any{"type": json.Number("1")}, "", false},
		{map[string]any{}, "", false},
		{[]any{"HELLO"}, "", false},
		{"HELLO", "", false},
		{nil, "", false},
	} {
		got, err := DecodeFrameType(tc.in)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("DecodeFrameType(%v) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if CodeOf(err) != CodeProtocolViolation || err == nil {
			t.Errorf("DecodeFrameType(%v) = %q, %v; want PROTOCOL_VIOLATION", tc.in, got, err)
		}
	}
	for _, ft := range []FrameType{FrameHello, FrameSubscribe, FrameCommand, FrameEvent, FrameAck, FramePing, FrameError, FrameBackpressure} {
		if got, err := DecodeFrameType(map[string]any{"type": string(ft)}); err != nil || got != ft {
			t.Errorf("%s: %q, %v", ft, got, err)
		}
		if newFrame(ft) == nil {
			t.Errorf("no struct for %s", ft)
		}
	}
}

func TestDecodeExactUsesTheCallersCode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		code    Code
		pointer string
	}{
		{"unknown member", `{"workItemId":"wi","ownershipEpoch":1,"leaseID":"l"}`, CodeSchemaValidationFailed, "/leaseID"},
		{"null", `{"workItemId":null,"ownershipEpoch":1}`, CodeInvalidCommand, "/workItemId"},
		{"bad time inside", `{"workItemId":"wi","ownershipEpoch":1,"leaseId":"l","progress":{"phase":"p","milestonesCompleted":[],"nextCheckpoint":"c","blockers":[],"revisedEstimate":{"completionAt":"yesterday","confidence":1},"evidenceRefs":[]}}`, CodeSchemaValidationFailed, "/progress/revisedEstimate/completionAt"},
		{"malformed", `{"workItemId":`, CodeSchemaValidationFailed, ""},
		{"trailing", `{} []`, CodeInvalidCommand, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p RenewLeasePayload
			err := DecodeExact([]byte(tc.in), &p, tc.code)
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("got %v, want code %s", err, tc.code)
			}
			if tc.pointer != "" && pe.Pointer != tc.pointer {
				t.Fatalf("pointer %q, want %q", pe.Pointer, tc.pointer)
			}
		})
	}
	var p StartWorkPayload
	if err := DecodeExact([]byte(`{"workItemId":"wi","ownershipEpoch":0}`), &p, CodeSchemaValidationFailed); err != nil {
		t.Fatal(err)
	}
	if p.WorkItemID != "wi" || p.OwnershipEpoch != 0 {
		t.Fatalf("%+v", p)
	}
	if err := DecodeExact([]byte(`{}`), p, CodeSchemaValidationFailed); CodeOf(err) != CodeInternalError {
		t.Fatalf("non-pointer target: %v", err)
	}
}

// FuzzDecodeFrame: decoding never panics, every failure is a
// PROTOCOL_VIOLATION, and a decoded frame re-encodes to bytes that decode
// and re-encode unchanged. (The first encoding may normalize, for example an
// empty error details object is omitted.)
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"COMMAND","frameId":"f-3","command":` + typesCmdJSON + `}`,
		`{"type":"EVENT","frameId":"s-2","event":` + typesEvtJSON + `}`,
		`{"type":"HELLO","frameId":"f-1","protocolVersions":["0.1"],"agentId":"w","sessionEpoch":3,"proof":` + typesProofJSON + `}`,
		`{"type":"ACK","frameId":"f-4","cursors":[{"groupId":"grp-a","sequence":1}]}`,
		`{"type":"PING","frameId":"f","nonce":"n","reply":true}`,
		`{"type":"ERROR","frameId":"f","error":{"code":"BACKPRESSURE","message":"m","retryable":true,"details":{"a":[1]}}}`,
		`{"type":"SUBSCRIBE","frameId":"f","groups":[{"groupId":"g","afterSequence":0,"filter":{"types":["x"]}}]}`,
		`{"type":"BACKPRESSURE","frameId":"f","groupId":"g","retryAfterMs":5}`,
		`{"type":"PING","frameID":"f","nonce":null}`, `[]`, `null`, `{"type":"HELLO"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := DecodeFrame(data)
		if err != nil {
			if CodeOf(err) != CodeProtocolViolation {
				t.Fatalf("error without PROTOCOL_VIOLATION: %v", err)
			}
			return
		}
		out, err := json.Marshal(frame)
		if err != nil {
			// A decoded Time past year 9999 cannot occur; anything else is a bug.
			t.Fatalf("decoded frame does not marshal: %v", err)
		}
		again, err := DecodeFrame(out)
		if err != nil {
			t.Fatalf("re-encoded frame %s does not decode: %v", out, err)
		}
		out2, err := json.Marshal(again)
		if err != nil || string(out2) != string(out) {
			t.Fatalf("round trip changed the frame (%v):\n%s\n%s", err, out, out2)
		}
	})
}

// BenchmarkDecodeFrame reports the cost of strict typed decoding of a
// COMMAND frame next to its baseline, a plain json.Unmarshal into the same
// struct, measured in the same run; compare the two, not absolute numbers.
func BenchmarkDecodeFrame(b *testing.B) {
	raw := []byte(`{"type":"COMMAND","frameId":"f-3","command":` + typesCmdJSON + `}`)
	b.Run("baseline-json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var f CommandFrame
			if err := json.Unmarshal(raw, &f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeFrame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeFrame(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	parsed, err := Parse(raw, DecodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeFrameParsed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeFrameParsed(raw, parsed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
