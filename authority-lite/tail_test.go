package authoritylite

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

type fataler interface {
	Fatalf(format string, args ...any)
}

// checkTailEqualsStore: every read of the Group answers what the store
// holds, whether the tail or the store answers it.
func checkTailEqualsStore(t fataler, s *Service, groupID string) {
	last := s.LastSequence(groupID)
	for after := uint64(0); after <= last+1; after++ {
		for _, max := range []int{0, 1, 3} {
			got, gerr := s.Events(groupID, after, max)
			want, werr := s.storedEvents(groupID, after, max)
			if protocol.CodeOf(gerr) != protocol.CodeOf(werr) || (gerr == nil) != (werr == nil) {
				t.Fatalf("after %d max %d: error %v, the store's %v", after, max, gerr, werr)
			}
			if len(got) != len(want) {
				t.Fatalf("after %d max %d: %d events, the store has %d", after, max, len(got), len(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.Sequence != w.Sequence || g.Type != w.Type || g.WorkItemID != w.WorkItemID || !bytes.Equal(g.Raw, w.Raw) {
					t.Fatalf("after %d max %d: event %d is %d %s %q, the store's %d %s %q", after, max, i, g.Sequence, g.Type, g.WorkItemID, w.Sequence, w.Type, w.WorkItemID)
				}
			}
		}
	}
}

func tailRun(from, n, size int) []wss.StoredEvent {
	out := make([]wss.StoredEvent, n)
	for i := range out {
		seq := uint64(from + i)
		out[i] = wss.StoredEvent{Sequence: seq, Type: protocol.EventType(fmt.Sprintf("t%d", seq)), Raw: []byte(strings.Repeat("x", size))}
	}
	return out
}

func seqs(evs []wss.StoredEvent) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, e.Sequence)
	}
	return b.String()
}

// TestEventTail: what the tail answers and when it sends a read to the
// store (ok false).
func TestEventTail(t *testing.T) {
	big := tailBytes / 4
	for _, tc := range []struct {
		name  string
		fill  func(*eventTail)
		after uint64
		max   int
		want  string
		ok    bool
	}{
		{"empty, nothing durable", func(*eventTail) {}, 0, 0, "", true},
		{"loaded, nothing in memory", func(t *eventTail) { t.last.Store(5) }, 2, 0, "", false},
		{"at the live end", func(t *eventTail) { t.last.Store(5) }, 5, 0, "", true},
		{"all after", func(t *eventTail) { t.add(tailRun(1, 5, 10)) }, 2, 0, "3,4,5", true},
		{"from its first", func(t *eventTail) { t.add(tailRun(1, 5, 10)) }, 0, 0, "1,2,3,4,5", true},
		{"max", func(t *eventTail) { t.add(tailRun(1, 5, 10)) }, 1, 2, "2,3", true},
		{"before its first", func(t *eventTail) { t.last.Store(3); t.add(tailRun(4, 2, 10)) }, 2, 0, "", false},
		{"just before its first", func(t *eventTail) { t.last.Store(3); t.add(tailRun(4, 2, 10)) }, 3, 0, "4,5", true},
		{"a gap empties it", func(t *eventTail) { t.add(tailRun(1, 3, 10)); t.add(tailRun(7, 2, 10)) }, 2, 0, "", false},
		{"after a gap", func(t *eventTail) { t.add(tailRun(1, 3, 10)); t.add(tailRun(7, 2, 10)) }, 6, 0, "7,8", true},
		{"bytes bound: oldest go", func(t *eventTail) { t.add(tailRun(1, 6, big)) }, 1, 0, "", false},
		{"bytes bound: newest stay", func(t *eventTail) { t.add(tailRun(1, 6, big)) }, 2, 0, "3,4,5,6", true},
		{"one event over the bound stays", func(t *eventTail) { t.add(tailRun(1, 1, 2*tailBytes)) }, 0, 0, "1", true},
		{"compacted", func(t *eventTail) { t.add(tailRun(1, 5, 10)); t.drop(3) }, 2, 0, "", false},
		{"compacted, rest kept", func(t *eventTail) { t.add(tailRun(1, 5, 10)); t.drop(3) }, 3, 0, "4,5", true},
		{"compacted to nothing", func(t *eventTail) { t.add(tailRun(1, 5, 10)); t.drop(5) }, 4, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl eventTail
			tc.fill(&tl)
			got, ok := tl.read(tc.after, tc.max)
			if ok != tc.ok || seqs(got) != tc.want {
				t.Fatalf("read(%d, %d) = %q %v, want %q %v", tc.after, tc.max, seqs(got), ok, tc.want, tc.ok)
			}
		})
	}
}

// TestEventTailKeepsWithinBound: however events arrive, the tail holds
// contiguous sequences ending at the last, within tailBytes unless a
// single event is larger.
func TestEventTailKeepsWithinBound(t *testing.T) {
	var tl eventTail
	next := 1
	for round := range 200 {
		n, size := 1+round%7, 100+(round*7919)%(tailBytes/8)
		tl.add(tailRun(next, n, size))
		next += n
		tail := tl.evs[tl.start:]
		total := 0
		for i, e := range tail {
			total += len(e.Raw)
			if i > 0 && e.Sequence != tail[i-1].Sequence+1 {
				t.Fatalf("round %d: %d after %d", round, e.Sequence, tail[i-1].Sequence)
			}
		}
		if total != tl.bytes || len(tail) > 1 && total > tailBytes || tail[len(tail)-1].Sequence != tl.last.Load() {
			t.Fatalf("round %d: %d events, %d bytes (counted %d), last %d of %d", round, len(tail), total, tl.bytes, tail[len(tail)-1].Sequence, tl.last.Load())
		}
	}
}

// checkIndexes: what a Group keeps up to date as it goes (open leases by
// WorkItem, the counted limits' counts) equals a rebuild from its records.
func checkIndexes(t fataler, s *Service, groupID string) {
	gs := s.group(groupID)
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	want := newItemCounts()
	want.count(gs.g.Items)
	got := gs.counts
	if got.open != want.open || got.active != want.active || got.queued != want.queued || got.clarifying != want.clarifying ||
		len(got.openByKey) != len(want.openByKey) || len(got.class) != len(want.class) {
		t.Fatalf("item counts %d/%d/%d/%d (%d keys, %d items), rebuilt %d/%d/%d/%d (%d keys, %d items)",
			got.open, got.active, got.queued, got.clarifying, len(got.openByKey), len(got.class),
			want.open, want.active, want.queued, want.clarifying, len(want.openByKey), len(want.class))
	}
	for k, n := range want.openByKey {
		if got.openByKey[k] != n {
			t.Fatalf("open WorkItems with key %q: %d, rebuilt %d", k, got.openByKey[k], n)
		}
	}
	open := gs.openLeases
	gs.indexOpenLeases()
	rebuilt := gs.openLeases
	gs.openLeases = open
	if len(open) != len(rebuilt) {
		t.Fatalf("open leases of %d WorkItems, rebuilt %d", len(open), len(rebuilt))
	}
	for id, recs := range rebuilt {
		kept := map[string]bool{}
		for _, r := range open[id] {
			kept[r.LeaseID] = true
		}
		for _, r := range recs {
			if !kept[r.LeaseID] || len(open[id]) != len(recs) {
				t.Fatalf("WorkItem %s: open leases %d, rebuilt %d (lease %s)", id, len(open[id]), len(recs), r.LeaseID)
			}
		}
	}
}
