package scheduler

import "math/bits"

// Per-Group item heaps. An eligible entry sits in the aging heap and, with a
// deadline, in the latest-start or the EDF heap. Each node carries its sort
// key, so a sift compares nodes in one array and never reads the entries;
// with a million items queued that is the difference between a cache-resident
// array and a cache miss per comparison. Removal is lazy: leaving the
// eligible set bumps the entry's generation, which makes its nodes dead; a
// dead node is dropped when it reaches the top, and a heap that is mostly
// dead is rebuilt, so space stays within twice the live nodes and the
// amortized cost O(log n). The order (key, then arrival seq) is total, so the
// live minimum, and hence every pick, is the same as with eager removal.
const (
	byAging    = iota // every eligible item, by aging key
	byDeadline        // deadline items with short slack, by deadline (EDF)
	byLatest          // other deadline items, by latest start (deadline − estimate)
	heapKinds
)

// node is 32 bytes: two fit a cache line. The entry is named by its slab
// number and the generation it had when pushed, not by a pointer and a
// 64-bit stamp.
type node struct {
	key int64
	seq uint64
	est int64  // the entry's estimate: the Group's heap key reads it here
	ref int32  // the entry's slab number
	gen uint32 // the entry's generation when pushed; live while they match
}

func nodeLess(x, y *node) bool { return nodeBefore(x, y) != 0 }

// nodeBefore is 1 when x goes before y, else 0: (key, seq) compared as one
// 128-bit number, without a branch, so that picking the smaller child costs
// no mispredicted jump.
func nodeBefore(x, y *node) uint64 {
	_, b := bits.Sub64(x.seq, y.seq, 0)
	_, b = bits.Sub64(uint64(x.key)^1<<63, uint64(y.key)^1<<63, b)
	return b
}

type entryHeap struct {
	a    []node
	live int
	ents *slab
}

func (h *entryHeap) entry(n *node) *entry { return h.ents.at(n.ref) }

func (h *entryHeap) alive(n *node) bool { return h.entry(n).gen == n.gen }

func (h *entryHeap) push(e *entry, key int64) {
	h.a = append(h.a, node{key: key, seq: e.seq, est: e.est, ref: e.self, gen: e.gen})
	h.live++
	h.up(len(h.a) - 1)
}

// topNode returns the live node with the smallest key, or nil, dropping the
// dead nodes above it. With no dead node in the heap it reads no entry.
func (h *entryHeap) topNode() *node {
	for len(h.a) > 0 {
		if n := &h.a[0]; len(h.a) == h.live || h.alive(n) {
			return n
		}
		h.popTop()
	}
	return nil
}

func (h *entryHeap) top() *entry {
	if n := h.topNode(); n != nil {
		return h.entry(n)
	}
	return nil
}

// pop removes the top entry; top must have returned it.
func (h *entryHeap) pop() {
	h.popTop()
	h.live--
}

// remove takes out e, whose generation has just moved on: at once when it
// is the top (the usual case: the pick), else lazily.
func (h *entryHeap) remove(e *entry) {
	if len(h.a) > 0 && h.a[0].ref == e.self {
		h.pop()
		return
	}
	h.live--
	if len(h.a) > 2*h.live+32 {
		h.compact()
	}
}

func (h *entryHeap) popTop() {
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a[n] = node{}
	h.a = h.a[:n]
	if n > 0 {
		h.down(0)
	}
}

// compact drops the dead nodes and restores the heap order in O(n).
func (h *entryHeap) compact() {
	j := 0
	for i := range h.a {
		if h.alive(&h.a[i]) {
			h.a[j] = h.a[i]
			j++
		}
	}
	clear(h.a[j:])
	h.a = h.a[:j]
	for i := j/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *entryHeap) up(j int) {
	a := h.a
	x := a[j]
	for j > 0 {
		i := (j - 1) / 2
		if !nodeLess(&x, &a[i]) {
			break
		}
		a[j] = a[i]
		j = i
	}
	a[j] = x
}

// cachedNodes: up to this many nodes (10 KiB) a heap stays in cache, and
// down chooses the smaller child without a jump, since the jump would be
// mispredicted half the time. In a larger heap the next level's load is a
// miss, and a predicted jump lets the CPU issue it before the comparison is
// done: worth more than the mispredictions.
const cachedNodes = 256

// down is Floyd's: the hole goes to a leaf along the smaller children, then
// x climbs back from there. x is mostly the former last node, which belongs
// near the bottom, so this takes one comparison a level instead of two.
func (h *entryHeap) down(i int) {
	a := h.a
	n := len(a)
	x, top := a[i], i
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n {
			if n <= cachedNodes {
				j += int(nodeBefore(&a[r], &a[l]))
			} else if nodeLess(&a[r], &a[l]) {
				j = r
			}
		}
		a[i] = a[j]
		i = j
	}
	for i > top {
		p := (i - 1) / 2
		if !nodeLess(&x, &a[p]) {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = x
}
