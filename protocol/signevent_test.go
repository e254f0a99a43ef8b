package protocol

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// signedEventReference is SignedEvent as it was before signevent.go, kept
// here as the reference the one-pass path must equal: marshal the Event,
// parse it, sign the parsed document, write its canonical bytes, read the
// signature back from them.
func signedEventReference(ev *Event, k PrivateKey) ([]byte, error) {
	return signByDocument(ev, &ev.Signature, k, "occurredAt", ev.OccurredAt)
}

// sameSignedEvent signs a copy of ev both ways and reports how they differ:
// the bytes, the Signature set on the Event, or one failing alone.
func sameSignedEvent(ev Event, k PrivateKey) (string, bool) {
	if msg, ok := sameEventDocument(ev, k); !ok {
		return msg, false
	}
	a, b := ev, ev
	got, gerr := SignedEvent(&a, k)
	want, werr := signedEventReference(&b, k)
	switch {
	case (gerr == nil) != (werr == nil):
		return fmt.Sprintf("one-pass error %v, reference error %v", gerr, werr), false
	case gerr != nil:
		return "", true
	case !bytes.Equal(got, want):
		return fmt.Sprintf("bytes differ\n one-pass  %s\n reference %s", got, want), false
	case a.Signature != b.Signature:
		return fmt.Sprintf("Signature %+v, reference %+v", a.Signature, b.Signature), false
	}
	return "", true
}

// sameEventDocument: the document SignedEventChecked validates, built from
// the Event's members, is what parsing its signing input gives (with the
// stand-in value), whenever both exist; and it is built for valid strings.
func sameEventDocument(ev Event, k PrivateKey) (string, bool) {
	buf, lay, err := unsignedEvent(&ev, k)
	if err != nil {
		return "", true
	}
	doc, built := eventDocument(&ev, buf, lay)
	probe := append(append(append([]byte{}, buf[:lay.cut]...), `,"value":"`+unsignedValue+`"`...), buf[lay.cut:]...)
	parsed, perr := Parse(probe, DecodeOptions{})
	switch {
	case !built && perr == nil && utf8.Valid(probe) && bytes.Equal(probe, bytes.ToValidUTF8(probe, nil)) &&
		!strings.Contains(string(probe), "\ufffd") && validEnvelope(ev):
		return "eventDocument gave up on an event that parses", false
	case built && perr != nil:
		return fmt.Sprintf("eventDocument built a document whose bytes do not parse: %v", perr), false
	case built && !reflect.DeepEqual(doc, parsed):
		return fmt.Sprintf("document\n built  %#v\n parsed %#v", doc, parsed), false
	}
	return "", true
}

func validEnvelope(ev Event) bool {
	ok := true
	for _, s := range []string{ev.AcceptedBy, ev.Actor.ID, string(ev.Actor.Kind), ev.CausationID, ev.CorrelationID, ev.EventID, ev.GroupID, string(ev.Type)} {
		ok = ok && utf8.ValidString(s)
	}
	if ev.Aggregate != nil {
		ok = ok && utf8.ValidString(ev.Aggregate.ID) && utf8.ValidString(string(ev.Aggregate.Kind))
	}
	return ok
}

func testEventKey(t testing.TB) PrivateKey {
	k, err := GenerateKey(KeyIDFor(ActorService, "authority-1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testEvent(payload string) Event {
	seq, rev := uint64(7), uint64(2)
	return Event{EventID: "evt-1", GroupID: "grp-a", Sequence: &seq, Aggregate: &Aggregate{Kind: AggregateWorkItem, ID: "wi-1"}, Revision: &rev,
		Type: "work.progressed", Actor: Actor{Kind: ActorAgent, ID: "w1"}, CausationID: "act-1", CorrelationID: "mis-a",
		OccurredAt: NewTime(time.Date(2026, 11, 30, 8, 0, 0, 120e6, time.UTC)), AcceptedBy: "authority-1", Payload: json.RawMessage(payload)}
}

// TestSignedEventTraps: what encoding/json writes differently from RFC
// 8785, and what Parse refuses, give the reference's bytes or its refusal.
func TestSignedEventTraps(t *testing.T) {
	k := testEventKey(t)
	payloads := []string{
		`{"text":"a<b && c>d","confidence":0.7}`,
		`{"text":"\u003cscript\u003e \u0026 \u2028\u2029"}`,
		"{\"text\":\"\u2028 raw \u2029\"}",
		`{"n":[-0,-0.0,0.0,1e21,1e20,1e-7,0.000001,5e-324,1.7976931348623157e308,4.50,1E+2,333333333.33333329]}`,
		`{"big":9007199254740991,"neg":-9007199254740991,"b16":1234567890123456}`,
		`{"tooBig":9007199254740992}`, `{"tooLong":12345678901234567}`, `{"over":1e400}`, `{"under":1e-400}`, `{"zero":0e-400}`,
		`{"esc":"\"\\\/\b\f\n\r\t\u0000\u001f\u007f\u00e9\ud83d\ude00"}`,
		`{"lone":"\ud800"}`, `{"low":"\udc00"}`, `{"nonchar":"\uffff"}`, "{\"nonchar\":\"\ufdd0\"}", "{\"bad\":\"\xff\"}",
		`{"dup":1,"dup":2}`, `{"a":{"x":1,"x":1}}`,
		"{\"\ue000\":1,\"\U0001F600\":2,\"a\":3,\"\":4}",
		` { "b" : [ 1 , { "d" : true , "c" : null } ] , "a" : "x" } `,
		`{}`, `[]`, `null`, `"s"`, `12`, ``, ` `, `{`, `{"a":}`, `[1,]`, `{"a":1}x`, `tru`, `01`, `1.`, `1e`, `-`,
		strings.Repeat("[", 63) + strings.Repeat("]", 63),
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
		strings.Repeat(`{"a":`, 63) + "1" + strings.Repeat("}", 63),
	}
	for _, p := range payloads {
		if msg, ok := sameSignedEvent(testEvent(p), k); !ok {
			t.Errorf("payload %q: %s", p, msg)
		}
	}
	ev := testEvent(`{}`)
	ev.Payload = nil
	if msg, ok := sameSignedEvent(ev, k); !ok {
		t.Errorf("nil payload: %s", msg)
	}
	for _, data := range []string{`{"b":[1,2.50],"a":"\u00e9"}`, `null`, strings.Repeat("[", 61) + strings.Repeat("]", 61), strings.Repeat("[", 62) + strings.Repeat("]", 62)} {
		ev := testEvent(`{"a":1}`)
		ev.Extensions = Extensions{"urn:example:x": {Critical: true, Data: json.RawMessage(data)}, "urn:example:a": {}}
		// Not sameSignedEvent: SignedEvent counts an extension's nesting
		// from its data, the reference from the event.
		if msg, ok := sameEventDocument(ev, k); !ok {
			t.Errorf("extension data %.40s: %s", data, msg)
		}
	}
	for _, s := range []string{"a<b>&c", "\u2028\u2029", "\x00\x1f\"\\", "é😀\ue000", "\xff", "a\xed\xa0\x80b", "\xf0\x9f\x98", "\ufffe", "\ufdd0", "\uFFFD"} {
		for _, edit := range []func(*Event){
			func(e *Event) { e.EventID = s }, func(e *Event) { e.GroupID = s }, func(e *Event) { e.Actor.ID = s },
			func(e *Event) { e.Aggregate.ID = s }, func(e *Event) { e.Type = EventType(s) }, func(e *Event) { e.CausationID = s },
			func(e *Event) { e.CorrelationID = s }, func(e *Event) { e.AcceptedBy = s }, func(e *Event) { e.Actor.Kind = ActorKind(s) },
		} {
			ev := testEvent(`{"a":1}`)
			edit(&ev)
			if msg, ok := sameSignedEvent(ev, k); !ok {
				t.Errorf("string %q: %s", s, msg)
			}
		}
	}
	big, safe := uint64(MaxSafeInteger+1), uint64(MaxSafeInteger)
	for _, edit := range []func(*Event){
		func(e *Event) { e.Sequence = &big }, func(e *Event) { e.Revision = &big }, func(e *Event) { e.Sequence = &safe },
		func(e *Event) { e.Sequence, e.Revision, e.Aggregate, e.GroupID = nil, nil, nil, "" }, // Organization-scoped
		func(e *Event) { e.OccurredAt = Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} },
		func(e *Event) { e.OccurredAt = Time{time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} },
		func(e *Event) { e.OccurredAt = Time{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)} },
		func(e *Event) {
			e.OccurredAt = Time{time.Date(2026, 1, 1, 8, 0, 0, 123456789, time.FixedZone("x", 3600))}
		},
		func(e *Event) { e.OccurredAt = Time{} },
	} {
		ev := testEvent(`{"a":1}`)
		edit(&ev)
		if msg, ok := sameSignedEvent(ev, k); !ok {
			t.Errorf("envelope %+v: %s", ev, msg)
		}
	}
	if _, err := SignedEvent(new(Event), PrivateKey{KeyID: "bad id"}); err == nil {
		t.Error("signed with an invalid key")
	}
}

// TestSignedEventProperty compares the two paths on random envelopes and
// payloads: payloads encoding/json writes from random Go values (what the
// authority signs) and random JSON texts (whitespace, escapes, numbers in
// every form, duplicates, errors).
func TestSignedEventProperty(t *testing.T) {
	k := testEventKey(t)
	rapid.Check(t, func(rt *rapid.T) {
		ev := testEvent(`{}`)
		ev.EventID = anyString().Draw(rt, "eventId")
		ev.CausationID = anyString().Draw(rt, "causationId")
		ev.CorrelationID = anyString().Draw(rt, "correlationId")
		ev.AcceptedBy = anyString().Draw(rt, "acceptedBy")
		ev.Actor = Actor{Kind: ActorKind(anyString().Draw(rt, "kind")), ID: anyString().Draw(rt, "actor")}
		ev.Type = EventType(anyString().Draw(rt, "type"))
		if rapid.Bool().Draw(rt, "org") {
			ev.GroupID, ev.Sequence, ev.Aggregate, ev.Revision = "", nil, nil, nil
		} else {
			ev.GroupID = anyString().Draw(rt, "groupId")
			seq, rev := anyUint().Draw(rt, "sequence"), anyUint().Draw(rt, "revision")
			ev.Sequence, ev.Revision = &seq, &rev
			ev.Aggregate = &Aggregate{Kind: AggregateKind(anyString().Draw(rt, "aggKind")), ID: anyString().Draw(rt, "aggId")}
		}
		ev.OccurredAt = Time{time.Unix(rapid.Int64Range(-62167219200-86400, 253402300799+86400).Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "nsec")).UTC()}
		if rapid.Bool().Draw(rt, "goValue") {
			raw, err := json.Marshal(jsonValue(4).Draw(rt, "payload"))
			if err != nil {
				rt.Skip("not marshalable")
			}
			ev.Payload = raw
		} else {
			ev.Payload = []byte(jsonText(4).Draw(rt, "payload"))
		}
		if msg, ok := sameSignedEvent(ev, k); !ok {
			rt.Fatal(msg)
		}
	})
}

// TestCanonicalTextMatchesCanonicalBytes: appendCanonicalText gives
// CanonicalBytes' bytes, or refuses what it refuses, on random texts, the
// JCS vectors and the ES6 number literals.
func TestCanonicalTextMatchesCanonicalBytes(t *testing.T) {
	same := func(data []byte) string {
		got, gerr := appendCanonicalText([]byte("prefix"), data, 0, DefaultMaxDepth)
		want, werr := CanonicalBytes(data, DecodeOptions{MaxBytes: math.MaxInt})
		switch {
		case (gerr == nil) != (werr == nil):
			return fmt.Sprintf("one pass %v, CanonicalBytes %v", gerr, werr)
		case gerr == nil && string(got) != "prefix"+string(want):
			return fmt.Sprintf("one pass %s, CanonicalBytes %s", got, want)
		case gerr != nil && CodeOf(gerr) != CodeOf(werr):
			return fmt.Sprintf("code %s, CanonicalBytes %s", CodeOf(gerr), CodeOf(werr))
		}
		return ""
	}
	rapid.Check(t, func(rt *rapid.T) {
		if msg := same([]byte(jsonText(5).Draw(rt, "text"))); msg != "" {
			rt.Fatal(msg)
		}
	})
	inputs, err := filepath.Glob(filepath.Join(publicVectors(t), "jcs", "input", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no JCS inputs: %v", err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		if msg := same(data); msg != "" {
			t.Errorf("%s: %s", filepath.Base(in), msg)
		}
	}
	f, err := os.Open(filepath.Join(publicVectors(t), "jcs", "numbers", "es6testfile-10k.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, lit, _ := strings.Cut(sc.Text(), ",")
		if msg := same([]byte(lit)); msg != "" {
			t.Errorf("literal %s: %s", lit, msg)
		}
	}
}

func FuzzCanonicalText(f *testing.F) {
	for _, s := range []string{`{"b":[1,{"d":2,"c":3}],"a":"\u00e9"}`, `{"a":1,"a":2}`, `-0.0e+1`, `"\ud800"`, `1e400`, `[[[]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := appendCanonicalText(nil, data, 0, 32)
		want, werr := CanonicalBytes(data, DecodeOptions{MaxBytes: math.MaxInt, MaxDepth: 32})
		if (gerr == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("%q: one pass %s (%v), CanonicalBytes %s (%v)", data, got, gerr, want, werr)
		}
	})
}

// anyString draws mostly plain ids, sometimes the characters encoding/json
// and RFC 8785 treat differently, invalid UTF-8 and noncharacters.
func anyString() *rapid.Generator[string] {
	pieces := []string{"a", "Z", "-", "0", " ", "<", ">", "&", "\u2028", "\u2029", "\"", "\\", "/", "\x00", "\n", "\x1f", "\x7f",
		"é", "😀", "\ue000", "\ufffd", "\xff", "\xed\xa0\x80", "\xf0\x9f", "\ufffe", "\U0010ffff"}
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 3).Draw(t, "plain") > 0 {
			return rapid.StringMatching(`[a-z0-9.:_-]{0,12}`).Draw(t, "id")
		}
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 6).Draw(t, "pieces"), "")
	})
}

func anyUint() *rapid.Generator[uint64] {
	return rapid.OneOf(rapid.Uint64Range(0, 1000), rapid.Uint64Range(MaxSafeInteger-2, MaxSafeInteger+2), rapid.Uint64())
}

// jsonValue draws Go values for encoding/json: floats of every kind,
// integers past 2^53, strings as anyString draws them, nested maps and
// slices.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		n := 7
		if depth == 0 {
			n = 4
		}
		switch rapid.IntRange(0, n).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 0.7, 1e21, 1e20, 1e-7, 1e-6, 5e-324, math.MaxFloat64, -1.5, 333333333.33333329, 0.1 + 0.2}).Draw(t, "float")
		case 1:
			return rapid.Float64().Draw(t, "anyFloat")
		case 2:
			return rapid.OneOf(rapid.Int64(), rapid.Int64Range(-MaxSafeInteger-2, -MaxSafeInteger+2)).Draw(t, "int")
		case 3:
			return anyString().Draw(t, "string")
		case 4:
			return rapid.SampledFrom([]any{true, false, nil}).Draw(t, "literal")
		case 5, 6:
			m := map[string]any{}
			for range rapid.IntRange(0, 5).Draw(t, "members") {
				m[anyString().Draw(t, "name")] = jsonValue(depth-1).Draw(t, "value")
			}
			return m
		default:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 4).Draw(t, "array")
		}
	})
}

// jsonText draws JSON texts as a peer might write them, valid or not.
func jsonText(depth int) *rapid.Generator[string] {
	ws := rapid.SampledFrom([]string{"", "", "", " ", "\n\t", "\r"})
	return rapid.Custom(func(t *rapid.T) string {
		n := 6
		if depth == 0 {
			n = 3
		}
		var s string
		switch rapid.IntRange(0, n).Draw(t, "kind") {
		case 0:
			s = rapid.SampledFrom([]string{"0", "-0", "-0.0", "1", "12", "1.0", "1e2", "1E+2", "2e-3", "4.50", "1e21", "1e-7", "0.000001",
				"9007199254740991", "9007199254740992", "-9007199254740991", "1234567890123456", "12345678901234567", "1e400", "1e-400",
				"0e-400", "5e-324", "01", "1.", ".5", "-", "+1", "1e", "0x10", "333333333.33333329"}).Draw(t, "number")
		case 1:
			parts := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "é", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\uffff", "\\uFDD0",
				"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0000", "\\u001F", "\\u2028", "\u2028", "<", "\\u003c", "\\x", "\x01",
				"\xff", "\ufffe", "😀", "\ue000"}), 0, 5).Draw(t, "chars")
			s = `"` + strings.Join(parts, "") + `"`
		case 2:
			s = rapid.SampledFrom([]string{"true", "false", "null", "tru", "nul", "[", "}", "", "[1,]", `{"a"}`, `{"a":1,}`}).Draw(t, "literal")
		case 3, 4:
			var b strings.Builder
			b.WriteString("{" + ws.Draw(t, "ws"))
			names := []string{`"a"`, `"b"`, `"é"`, `"\u00e9"`, `"😀"`, `"\ue000"`, `""`, `"A"`, `"aa"`}
			for i := range rapid.IntRange(0, 4).Draw(t, "members") {
				if i > 0 {
					b.WriteString("," + ws.Draw(t, "ws"))
				}
				b.WriteString(rapid.SampledFrom(names).Draw(t, "name") + ws.Draw(t, "ws") + ":" + ws.Draw(t, "ws"))
				b.WriteString(jsonText(depth-1).Draw(t, "value"))
			}
			b.WriteString(ws.Draw(t, "ws") + "}")
			s = b.String()
		default:
			items := rapid.SliceOfN(jsonText(depth-1), 0, 4).Draw(t, "items")
			s = "[" + strings.Join(items, ","+ws.Draw(t, "ws")) + "]"
		}
		return ws.Draw(t, "lead") + s + ws.Draw(t, "trail")
	})
}

// BenchmarkSignEvent signs one event of each size both ways: a message
// (small), a lease renewal with progress, an offer carrying its contract
// and two candidates' selection bases. Ed25519 alone is the floor.
func BenchmarkSignEvent(b *testing.B) {
	k := testEventKey(b)
	for _, c := range []struct{ name, payload string }{
		{"message", `{"messageId":"m-1","conversationId":"c","author":{"kind":"human","id":"alice"},"text":"progress note number 17","state":"posted"}`},
		{"progress", benchProgressPayload},
		{"offer", benchOfferPayload},
	} {
		ev := testEvent(c.payload)
		raw, err := SignedEvent(&ev, k)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := ev
				if _, err := signedEventReference(&e, k); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := ev
				if _, err := SignedEvent(&e, k); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/one-pass-checked", func(b *testing.B) { // the authority's path: schema first
			if e := ev; func() error { _, err := SignedEventChecked(&e, k); return err }() != nil {
				b.Skip("this payload is not valid for the test event's type")
			}
			b.ReportAllocs()
			for b.Loop() {
				e := ev
				if _, err := SignedEventChecked(&e, k); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/ed25519", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = ed25519.Sign(k.Key, raw)
			}
		})
	}
}

// What encoding/json writes for a group.Progressed of a lease renewal and a
// group.OfferCreated of grouptest's contract with two candidates.
const (
	benchProgressPayload = `{"workItemId":"wi-1","state":"active","leaseId":"lease-0123456789abcdef0123456789abcdef","lease":{"leaseId":"lease-0123456789abcdef0123456789abcdef","agentId":"w1","sessionEpoch":1,"workItemId":"wi-1","ownershipEpoch":1,"startedAt":"2026-11-30T08:00:00Z","renewals":["2026-11-30T08:01:00Z"],"expiresAt":"2026-11-30T08:03:00Z"},"progress":{"phase":"coding","milestonesCompleted":["design"],"nextCheckpoint":"tests green","blockers":[],"revisedEstimate":{"completionAt":"2026-11-30T09:00:00Z","confidence":0.7},"evidenceRefs":[]}}`
	benchOfferPayload    = `{"workItemId":"wi-1","state":"offered","offerId":"off-1","contract":{"contractId":"wc-wi-1","revision":1,"goal":"implement wi-1","requiredOutputs":[{"name":"patch","mediaType":"text/x-diff"}],"acceptanceCriteria":[{"id":"ac-1","description":"tests pass","evidenceRequired":["test-report"]},{"id":"ac-2","description":"lint clean","evidenceRequired":["lint-report"]}],"inputs":[],"dependencies":[],"allowedTools":["git"],"allowedData":["repo:a"],"allowedOperations":["read","write"],"resourceLimits":{},"requiredCapabilities":[{"id":"code.implement","version":"1.x"}],"deadline":"2026-12-01T08:00:00Z","urgency":"normal","businessImpact":"medium","budgets":{"tokens":1000},"retryPolicy":{"maxAttempts":3,"backoff":{"initialMs":500,"maxMs":30000,"multiplier":2},"attemptTimeoutMs":0,"costLimit":0},"risk":{"class":"low","preExecutionApproval":false}},"contractRevision":1,"candidates":[{"agentId":"w1","selectionBasis":{"capabilityMatches":[{"id":"code.implement","required":"1.x","offered":"1.2.0"}],"authorizationEligible":true,"availabilityEstimate":{"earliestStart":"2026-11-30T08:00:00Z","confidence":0.9},"expectedCost":{"tokens":100},"reliabilityEvidence":[],"policyRulesApplied":["capability-match"]}},{"agentId":"w2","selectionBasis":{"capabilityMatches":[{"id":"code.implement","required":"1.x","offered":"1.2.0"}],"authorizationEligible":true,"availabilityEstimate":{"earliestStart":"2026-11-30T08:00:00Z","confidence":0.9},"expectedCost":{"tokens":100},"reliabilityEvidence":[],"policyRulesApplied":["capability-match"]}}],"offerExpiresAt":"2026-11-30T08:01:00Z"}`
)
