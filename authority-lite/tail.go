package authoritylite

import (
	"sync"
	"sync/atomic"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// tailBytes bounds the signed bytes a Group's tail keeps in memory: a few
// hundred events, enough for every stream that keeps up with the live end.
const tailBytes = 256 << 10

// eventTail is a Group's newest durable events in memory, in sequence
// order, and its highest durable sequence. Streams at the live end read
// here instead of opening a store transaction and decoding every event
// again (docs/performance.md). The writer's goroutine adds events after
// their commit (bolt.Tx.OnCommit), so the tail follows the log's order
// and never holds what a crash could take back.
type eventTail struct {
	last atomic.Uint64 // highest durable sequence

	mu    sync.Mutex
	evs   []wss.StoredEvent // evs[start:] is the tail
	start int
	bytes int
}

// tailEvents is what a tail keeps of sealed events. Every reader shares
// the bytes, so their capacity is cut to their length: an append by one
// reader copies instead of writing where another reads.
func tailEvents(events []sealed) []wss.StoredEvent {
	out := make([]wss.StoredEvent, len(events))
	for i, e := range events {
		out[i] = storedEvent(e.ev, e.raw[:len(e.raw):len(e.raw)])
	}
	return out
}

// storedEvent is what a read of the log returns of one event.
func storedEvent(ev *protocol.Event, raw []byte) wss.StoredEvent {
	se := wss.StoredEvent{Sequence: ev.Seq(), Type: ev.Type, Raw: raw}
	if ev.Aggregate != nil && ev.Aggregate.Kind == protocol.AggregateWorkItem {
		se.WorkItemID = ev.Aggregate.ID
	}
	return se
}

// add appends committed events. A gap (events that reached the log some
// other way) empties the tail: reads before it go to the store.
func (t *eventTail) add(evs []wss.StoredEvent) {
	if len(evs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.evs); n > t.start && t.evs[n-1].Sequence+1 != evs[0].Sequence {
		t.evs, t.start, t.bytes = t.evs[:0], 0, 0
	}
	for _, e := range evs {
		t.evs = append(t.evs, e)
		t.bytes += len(e.Raw)
	}
	for t.bytes > tailBytes && len(t.evs)-t.start > 1 {
		t.bytes -= len(t.evs[t.start].Raw)
		t.evs[t.start] = wss.StoredEvent{}
		t.start++
	}
	if t.start > len(t.evs)/2 {
		n := copy(t.evs, t.evs[t.start:])
		clear(t.evs[n:])
		t.evs, t.start = t.evs[:n], 0
	}
	if s := evs[len(evs)-1].Sequence; s > t.last.Load() {
		t.last.Store(s)
	}
}

// drop forgets events up to and including seq, as compaction removes them
// from the log.
func (t *eventTail) drop(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.start < len(t.evs) && t.evs[t.start].Sequence <= seq {
		t.bytes -= len(t.evs[t.start].Raw)
		t.evs[t.start] = wss.StoredEvent{}
		t.start++
	}
}

// read returns up to max events after a sequence (max ≤ 0: all), and
// whether the tail could answer: it holds every event after it, or there
// is none.
func (t *eventTail) read(after uint64, max int) ([]wss.StoredEvent, bool) {
	if after >= t.last.Load() {
		return nil, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tail := t.evs[t.start:]
	if len(tail) == 0 || after+1 < tail[0].Sequence {
		return nil, false
	}
	tail = tail[after+1-tail[0].Sequence:]
	if max > 0 && len(tail) > max {
		tail = tail[:max]
	}
	return append([]wss.StoredEvent(nil), tail...), true
}
