package remote

import (
	"fmt"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// log is a Group's events from..to of one history (branch): the same
// branch gives the same bytes.
func log(branch string, from, to uint64) []SignedEvent {
	var out []SignedEvent
	for s := from; s <= to; s++ {
		out = append(out, SignedEvent{Sequence: s, Raw: []byte(fmt.Sprintf(`{"eventId":"evt-%s-%d"}`, branch, s))})
	}
	return out
}

// A reader that continues a Group reads its newest events again; an
// authority whose log is another history at those sequences, or ends
// before them, is refused for good, with the binding's details.reason.
func TestTailsFindDivergence(t *testing.T) {
	cases := []struct {
		name string
		// the authority's log on the second read, from the position plan gives
		page     func(from uint64) []SignedEvent
		complete bool
		reason   string // "" : no divergence
		rest     int
	}{
		{"the same history goes on", func(from uint64) []SignedEvent { return log("a", from+1, 14) }, true, "", 4},
		{"the same history, nothing new", func(from uint64) []SignedEvent { return log("a", from+1, 10) }, true, "", 0},
		{"another event under an applied sequence", func(from uint64) []SignedEvent {
			return append(log("a", from+1, 8), log("b", 9, 14)...)
		}, true, ReasonDiverged, 0},
		{"the log ends before the cursor", func(from uint64) []SignedEvent { return log("a", from+1, 8) }, true, reasonAheadOfLog, 0},
		{"the log ends at the overlap's start", func(uint64) []SignedEvent { return nil }, true, reasonAheadOfLog, 0},
		{"a page cut by max says nothing of the log's end", func(from uint64) []SignedEvent { return log("a", from+1, 8) }, false, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ts tails
			from, overlap, err := ts.plan("g", 0)
			if err != nil || from != 0 || overlap != nil {
				t.Fatalf("first plan = %d %v %v", from, overlap, err)
			}
			if got, err := ts.settle("g", 0, 0, nil, log("a", 1, 10), true); err != nil || len(got) != 10 {
				t.Fatalf("first read = %d events, %v", len(got), err)
			}
			from, overlap, err = ts.plan("g", 10)
			if err != nil || from != 10-OverlapEvents || len(overlap) != OverlapEvents {
				t.Fatalf("plan after 10 = %d, %d held, %v", from, len(overlap), err)
			}
			rest, err := ts.settle("g", from, 10, overlap, c.page(from), c.complete)
			if c.reason == "" {
				if err != nil || len(rest) != c.rest {
					t.Fatalf("settle = %d events, %v; want %d", len(rest), err, c.rest)
				}
				return
			}
			e, ok := err.(*protocol.Error)
			if !ok || e.Code != protocol.CodeProtocolViolation || e.Details["reason"] != c.reason || e.Details["groupId"] != "g" {
				t.Fatalf("settle = %v; want PROTOCOL_VIOLATION %s", err, c.reason)
			}
			if _, _, again := ts.plan("g", 10); again != err {
				t.Fatalf("a later read = %v; want the same refusal", again)
			}
		})
	}
}

// An ahead_of_log refusal of a Group the reader was given events of is
// kept: every later read is refused. One of a Group it holds nothing of
// is not.
func TestTailsKeepAheadOfLog(t *testing.T) {
	ahead := protocol.WithDetails(protocol.Errorf(protocol.CodeProtocolViolation, "past the log"), "reason", reasonAheadOfLog)
	var ts tails
	if err := ts.refused("new", ahead); err != ahead {
		t.Fatal(err)
	}
	if _, _, err := ts.plan("new", 0); err != nil {
		t.Fatalf("a Group never read is refused: %v", err)
	}
	if _, err := ts.settle("g", 0, 0, nil, log("a", 1, 3), true); err != nil {
		t.Fatal(err)
	}
	_ = ts.refused("g", ahead)
	if _, _, err := ts.plan("g", 3); err != ahead {
		t.Fatalf("after ahead_of_log: %v", err)
	}
}
