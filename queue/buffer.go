package queue

import (
	"slices"
)

// reorderBuffer holds a Group's events that arrived ahead of a gap, sorted
// by sequence and bounded by count and bytes (like raft's inflights). It is
// memory only: after a crash the authority replays from the durable cursor.
type reorderBuffer struct {
	evs   []held
	bytes int
}

type held struct {
	seq uint64
	in  Incoming
}

func (h held) size() int { return len(h.in.Raw) }

func (b *reorderBuffer) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(b.evs, seq, func(h held, s uint64) int {
		switch {
		case h.seq < s:
			return -1
		case h.seq > s:
			return 1
		}
		return 0
	})
}

// get returns the event held at seq.
func (b *reorderBuffer) get(seq uint64) (Incoming, bool) {
	i, ok := b.find(seq)
	if !ok {
		return Incoming{}, false
	}
	return b.evs[i].in, true
}

// add holds h (whose sequence is not held yet) unless the buffer is full.
// When full, an event closer to the cursor wins: held events with higher
// sequences are evicted to make room, and h itself is refused when the
// nearer events already fill the bounds. It returns the evicted events and
// whether h was kept.
func (b *reorderBuffer) add(h held, maxCount, maxBytes int) (evicted []held, kept bool) {
	i, _ := b.find(h.seq)
	below := 0
	for _, x := range b.evs[:i] {
		below += x.size()
	}
	// Would h fit with every farther event evicted?
	if i+1 > maxCount || below+h.size() > maxBytes {
		return nil, false
	}
	for len(b.evs) >= maxCount || b.bytes+h.size() > maxBytes {
		last := b.evs[len(b.evs)-1]
		b.evs = b.evs[:len(b.evs)-1]
		b.bytes -= last.size()
		evicted = append(evicted, last)
	}
	b.evs = slices.Insert(b.evs, i, h)
	b.bytes += h.size()
	return evicted, true
}

// remove drops the event held at seq.
func (b *reorderBuffer) remove(seq uint64) {
	if i, ok := b.find(seq); ok {
		b.bytes -= b.evs[i].size()
		b.evs = slices.Delete(b.evs, i, i+1)
	}
}

// dropThrough drops every event at or below seq (applied, or covered by a
// restored snapshot).
func (b *reorderBuffer) dropThrough(seq uint64) {
	i, ok := b.find(seq)
	if ok {
		i++
	}
	for _, h := range b.evs[:i] {
		b.bytes -= h.size()
	}
	b.evs = slices.Delete(b.evs, 0, i)
}

// first returns the lowest held sequence, or 0.
func (b *reorderBuffer) first() uint64 {
	if len(b.evs) == 0 {
		return 0
	}
	return b.evs[0].seq
}
