package queue

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// canonicalTexts are stored events of every projected type the test
// streams make: the texts the fast path must take.
func canonicalTexts() [][]byte {
	var out [][]byte
	add := func(st *stream) {
		for _, in := range st.evs {
			if typ, ok := trailingType(in.Raw); ok && projected(typ) {
				out = append(out, in.Raw)
			}
		}
	}
	for _, tc := range append(projectCases(), replayCases()...) {
		st := newStream("g")
		if tc.setup != nil {
			tc.setup(st)
		}
		tc.event(st)
		add(st)
	}
	add(randomStream("g", 60, rand.New(rand.NewPCG(1, 2))))
	return out
}

// sameAsGeneral fails t when the fast path takes raw and decodes it other
// than the general path does.
func sameAsGeneral(t *testing.T, raw []byte) bool {
	t.Helper()
	typ, ok := trailingType(raw)
	if !ok || !projected(typ) {
		return false
	}
	fast, ok := canonicalFact("g", raw, typ)
	if !ok {
		return false
	}
	fast.seq = 7
	if general := decodeGeneral("g", 7, raw); !reflect.DeepEqual(fast, general) {
		t.Fatalf("fast path:\n%+v\ngeneral path:\n%+v\ntext: %s", fast, general, raw)
	}
	return true
}

// Every canonical text whose payload decodes takes the fast path, and
// decodes as the general path decodes it.
func TestCanonicalFactSamePath(t *testing.T) {
	texts := canonicalTexts()
	types := map[protocol.EventType]bool{}
	for _, raw := range texts {
		if !sameAsGeneral(t, raw) {
			if decodeGeneral("g", 7, raw).typed {
				t.Fatalf("canonical text not taken: %s", raw)
			}
			continue
		}
		typ, _ := trailingType(raw)
		types[typ] = true
	}
	if len(types) < 15 {
		t.Fatalf("only %d event types covered", len(types))
	}
}

// Texts the fast path must leave to the general path: not canonical, not
// JSON, or holding what only the general rules decide.
func TestCanonicalFactGivesUp(t *testing.T) {
	var base []byte
	for _, raw := range canonicalTexts() {
		if bytes.Contains(raw, []byte(`"type":"work.offer.accepted"`)) {
			base = raw
			break
		}
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(base, []byte(old)) {
			t.Fatalf("base text has no %s", old)
		}
		return bytes.Replace(base, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		raw  []byte
	}{
		{"space after a colon", edit(`"actor":`, `"actor": `)},
		{"space in a skipped value", edit(`"actor":{"id"`, `"actor":{ "id"`)},
		{"member out of order", edit(`"acceptedBy":"authority-1","actor"`, `"actor":{"id":"x","kind":"agent"},"acceptedBy":"authority-1","actorX"`)},
		{"name differing in case", edit(`"occurredAt":`, `"OccurredAt":`)},
		{"unknown member", edit(`"eventId":`, `"eventIdx":1,"eventId":`)},
		{"repeated member", edit(`"eventId":`, `"eventId":"e","eventId":`)},
		{"escape in a skipped string", edit(`"causationId":"act-`, `"causationId":"\u0061ct-`)},
		{"control byte in a skipped string", edit(`"causationId":"act-`, "\"causationId\":\"\x01act-")},
		{"invalid number in a skipped value", edit(`"acceptedBy":"authority-1"`, `"acceptedBy":01`)},
		{"invalid literal in a skipped value", edit(`"acceptedBy":"authority-1"`, `"acceptedBy":nul`)},
		{"unclosed skipped object", edit(`"kind":"agent"},"aggregate"`, `"kind":"agent","aggregate"`)},
		{"aggregate null", edit(`"aggregate":{"id":"wi-1","kind":"workItem"}`, `"aggregate":null`)},
		{"aggregate with another member", edit(`"kind":"workItem"}`, `"kind":"workItem","x":1}`)},
		{"occurredAt not a string", edit(`"occurredAt":"`, `"occurredAt":1,"x":"`)},
		{"occurredAt not a wire time", edit(`T08:00:`, `t08:00:`)},
		{"sequence with a leading zero", edit(`"sequence":`, `"sequence":0`)},
		{"sequence over uint64", edit(`"sequence":`, `"sequence":99999999999999999999`)},
		{"sequence negative", edit(`"sequence":`, `"sequence":-`)},
		{"revision a fraction", edit(`,"sequence":`, `.5,"sequence":`)},
		{"member between payload and revision", edit(`},"revision":`, `},"q":1,"revision":`)},
		{"payload null", append(append([]byte(nil), base[:bytes.Index(base, []byte(`"payload":`))+len(`"payload":`)]...), base[bytes.Index(base, []byte(`,"revision":`)):]...)},
		{"payload not of its type", edit(`"state":"queued"`, `"state":7`)},
		{"signature unclosed", edit(`"keyId":"authority-1#k1",`, `"keyId":"authority-1#k1",,`)},
		{"trailing bytes", append(append([]byte(nil), base[:len(base)-1]...), []byte(`,"z":1}`)...)},
	}
	if !sameAsGeneral(t, base) {
		t.Fatal("base text not taken")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if sameAsGeneral(t, tc.raw) {
				t.Fatalf("taken: %s", tc.raw)
			}
		})
	}
}

// What the fast path takes, whatever the bytes, decodes as the general
// path decodes it.
func FuzzCanonicalFact(f *testing.F) {
	for _, raw := range canonicalTexts() {
		f.Add(raw)
	}
	f.Add([]byte(`{"payload":{},"signature":{},"type":"work.started"}`))
	f.Add([]byte(strings.Repeat("[", 40)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameAsGeneral(t, raw)
	})
}

func TestLastIndexNear(t *testing.T) {
	cases := []struct{ b, sep string }{
		{"", "ab"}, {"ab", "ab"}, {"xxabxxxxxx", "ab"}, {"abxxxxxxab", "ab"},
		{"xxxxxxxab", "ab"}, {"xxxxxxa", "ab"}, {"abxxxxabxa", "ab"}, {"xxxxxaba", "ab"},
	}
	for _, tc := range cases {
		for window := range 12 {
			if got, want := lastIndexNear([]byte(tc.b), []byte(tc.sep), window), strings.LastIndex(tc.b, tc.sep); got != want {
				t.Errorf("lastIndexNear(%q, %q, %d) = %d, want %d", tc.b, tc.sep, window, got, want)
			}
		}
	}
}
