package toolkeys

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestDecide(t *testing.T) {
	op := opA // epoch 3
	rec := func(st State, attempts uint64) *Record { return &Record{State: st, Attempts: attempts, Error: "last"} }
	cases := []struct {
		name   string
		fence  uint64
		rec    *Record
		budget uint64
		want   verdict
		err    error  // matched with errors.Is
		text   string // the refusal says this
	}{
		{"new", 0, nil, 0, verdictStart, nil, ""},
		{"new at the fence", 3, nil, 0, verdictStart, nil, ""},
		{"new below the fence", 4, nil, 0, verdictRefuse, &protocol.Error{Code: protocol.CodeWorkStaleOwnership}, ""},
		{"completed", 0, rec(StateCompleted, 5), 2, verdictReplay, nil, ""},
		{"completed below the fence", 4, rec(StateCompleted, 1), 0, verdictRefuse, &protocol.Error{Code: protocol.CodeWorkStaleOwnership}, ""},
		{"failed, no budget", 0, rec(StateFailed, 100), 0, verdictStart, nil, ""},
		{"failed within budget", 0, rec(StateFailed, 1), 2, verdictStart, nil, ""},
		{"failed at budget", 0, rec(StateFailed, 2), 2, verdictRefuse, ErrExhausted, "(2 of 2): last"},
		{"interrupted within budget", 0, rec(StateStarted, 1), 2, verdictStart, nil, ""},
		{"interrupted at budget", 0, rec(StateStarted, 2), 2, verdictRefuse, ErrExhausted, "(2 of 2): the last attempt was interrupted"},
		{"permanent", 0, rec(StateFailedPermanently, 1), 0, verdictRefuse, ErrPermanent, ""},
	}
	for _, c := range cases {
		got, err := decide(op, c.fence, c.rec, c.budget)
		if got != c.want || (c.err == nil) != (err == nil) || (c.err != nil && !errors.Is(err, c.err)) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.text)
		}
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	// Exactly the limit is kept whole; bytes that are all continuation
	// bytes (not UTF-8 at all) are cut to nothing rather than panicking.
	for _, s := range []string{strings.Repeat("é", 400), strings.Repeat("x", maxErrorLen-1) + "🚀", "short",
		strings.Repeat("x", maxErrorLen), strings.Repeat("\x80", maxErrorLen+1)} {
		got := truncate(s)
		if !utf8.ValidString(got) || len(got) > maxErrorLen+len("…") || (len(s) <= maxErrorLen && got != s) {
			t.Errorf("truncate(%d bytes) = %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
}

// FuzzDecodeRecord: whatever bytes a damaged file holds, decoding never
// panics, and what it accepts survives a round trip unchanged.
func FuzzDecodeRecord(f *testing.F) {
	r := Record{Op: opA, State: StateCompleted, Attempts: 2, Result: []byte("ok"),
		StartedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 11, 30, 8, 0, 1, 0, time.UTC)}
	good, _ := encodeRecord(&r)
	f.Add(good)
	f.Add([]byte(`{"op":{},"state":"started","attempts":1}`))
	f.Add([]byte(`{"state":"completed","attempts":0}`))
	f.Add([]byte(`{"state":"done","attempts":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, v []byte) {
		rec, err := decodeRecord("k", v)
		if err != nil {
			return
		}
		if rec.Key != "k" || rec.Attempts == 0 {
			t.Fatalf("accepted %+v", rec)
		}
		enc, err := encodeRecord(&rec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRecord("k", enc)
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(rec)) {
			t.Fatalf("round trip: %+v %v, was %+v", again, err, rec)
		}
	})
}

// normalize makes equal records DeepEqual: time locations and an empty
// versus nil result do not matter.
func normalize(r Record) Record {
	r.StartedAt, r.UpdatedAt = r.StartedAt.UTC(), r.UpdatedAt.UTC()
	if len(r.Result) == 0 {
		r.Result = nil
	}
	return r
}
