package scheduler

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Compaction keeps the heap order: after most nodes die and the heap is
// rebuilt, the live entries come out by (key, seq) exactly.
func TestEntryHeapCompactKeepsOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 20 {
		var ents slab
		h := entryHeap{ents: &ents}
		es := make([]*entry, 300)
		keys := map[*entry]int64{}
		for i := range es {
			es[i] = ents.get()
			es[i].seq = uint64(i)
			keys[es[i]] = r.Int64N(50)
			h.push(es[i], keys[es[i]])
		}
		for _, i := range r.Perm(len(es))[:250] {
			es[i].gen++ // its nodes are dead now
			delete(keys, es[i])
			h.remove(es[i])
		}
		h.compact()
		if len(h.a) != len(keys) || h.live != len(keys) {
			t.Fatalf("round %d: %d nodes, %d live, want %d", round, len(h.a), h.live, len(keys))
		}
		prev := node{key: -1}
		for e := h.top(); e != nil; e = h.top() {
			n := node{key: keys[e], seq: e.seq}
			if !nodeLess(&prev, &n) {
				t.Fatalf("round %d: (%d, %d) came after (%d, %d)", round, n.key, n.seq, prev.key, prev.seq)
			}
			prev = n
			delete(keys, e)
			h.pop()
		}
		if len(keys) != 0 {
			t.Fatalf("round %d: %d live entries never came out", round, len(keys))
		}
	}
}

// Removing every entry, in any order, leaves an empty heap: the last
// removal may find a dead node on top and no live one left.
func TestEntryHeapRemoveAll(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	for round := range 50 {
		var ents slab
		h := entryHeap{ents: &ents}
		es := make([]*entry, 2+r.IntN(60))
		for i := range es {
			es[i] = ents.get()
			es[i].seq = uint64(i)
			h.push(es[i], r.Int64N(20))
		}
		for _, i := range r.Perm(len(es)) {
			es[i].gen++
			h.remove(es[i])
		}
		if h.top() != nil || h.live != 0 {
			t.Fatalf("round %d: top %v, %d live after removing all", round, h.top(), h.live)
		}
	}
}

func TestCeilMulDiv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b, c, want int64 }{
		{0, 5, 3, 0},
		{1, 1, 1, 1},
		{6, 3, 2, 9},  // exact
		{7, 3, 2, 11}, // 10.5 rounds up
		{1, 1, 3, 1},
		{1 << 40, 1 << 20, 1 << 30, 1 << 30},
		{1<<40 + 1, 1 << 20, 1 << 30, 1<<30 + 1},
		// a*b = c·2^64: the quotient does not fit 64 bits.
		{1 << 32, 1 << 32, 1, math.MaxInt64 / 2},
		{math.MaxInt64, math.MaxInt64, 2, math.MaxInt64 / 2},
	} {
		if got := ceilMulDiv(tc.a, tc.b, tc.c); got != tc.want {
			t.Errorf("ceilMulDiv(%d, %d, %d) = %d, want %d", tc.a, tc.b, tc.c, got, tc.want)
		}
	}
}
