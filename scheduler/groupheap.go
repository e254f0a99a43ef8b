package scheduler

import (
	"math"
	"math/bits"
)

// groupHeap orders ready Groups by keyLess: virtual start time, virtual
// finish time, id. Nodes carry the float keys, so a comparison reads no
// group and, in the usual case, takes no branch on the data: choosing the
// smaller child was a coin toss per level for the branch predictor, and two
// Groups are re-keyed every cycle.
type groupHeap struct {
	a []gnode
	// lim: svc up to lim with every weight up to maxW gives float start
	// times that tie only when the exact ones do (see gFast).
	lim, maxW uint64
}

// gnode holds keyVT and keyVF as bits that order as the floats do.
type gnode struct {
	vt, vf  uint64
	inexact uint64 // all ones: svc above lim, float ties need the exact check
	g       *group
}

func (h *groupHeap) node(g *group) gnode {
	n := gnode{vt: floatKey(g.keyVT), vf: floatKey(g.keyVF), g: g}
	if uint64(g.keySvc) > h.lim {
		n.inexact = ^uint64(0)
	}
	return n
}

// noteWeight raises maxW to w and lowers lim to match, marking again the
// nodes it affects.
func (h *groupHeap) noteWeight(w int64) {
	if uint64(w) <= h.maxW {
		return
	}
	h.maxW = uint64(w)
	h.lim = 1 << 51 / h.maxW
	for i := range h.a {
		h.a[i] = h.node(h.a[i].g)
	}
}

// floatKey maps a float64 to bits that order as the floats do.
func floatKey(f float64) uint64 {
	b := math.Float64bits(f)
	return b ^ (uint64(int64(b)>>63) | 1<<63)
}

// gFast is keyLess on the nodes, 1 when x goes before y, else 0: (vt, vf)
// compared as one 128-bit number without a branch. That decides (ok) unless
// the float start times tie and either svc is above lim, or the float
// finish times tie too; gExact decides those. Below lim two distinct exact
// start times s/w ≠ s'/w' differ by at least 1/(w·w'), more than the float
// spacing there, so float start times tie only when the exact ones do.
func gFast(x, y *gnode) (before uint64, ok bool) {
	_, b := bits.Sub64(x.vf, y.vf, 0)
	_, b = bits.Sub64(x.vt, y.vt, b)
	return b, x.vt^y.vt|(x.vf^y.vf)&^(x.inexact|y.inexact) != 0
}

// gExact is keyLess itself, for the ties gFast leaves.
func gExact(x, y *gnode) uint64 {
	if keyLess(x.g, y.g) {
		return 1
	}
	return 0
}

func (h *groupHeap) top() *group {
	if len(h.a) == 0 {
		return nil
	}
	return h.a[0].g
}

func (h *groupHeap) push(g *group) {
	g.setKey()
	h.a = append(h.a, h.node(g))
	h.up(len(h.a) - 1)
}

func (h *groupHeap) remove(g *group) {
	i := g.hpos
	if i < 0 {
		return
	}
	n := len(h.a) - 1
	last := h.a[n]
	h.a[n] = gnode{}
	h.a = h.a[:n]
	g.hpos = -1
	if i == n {
		return
	}
	h.a[i] = last
	if !h.down(i) {
		h.up(i)
	}
}

// fix re-keys the Group at i and moves it the way its key went: one sift,
// none when the key kept its order.
func (h *groupHeap) fix(i int) {
	g := h.a[i].g
	est := g.nextEst()
	c := vtCmp(g.svc, g.weight, g.keySvc, g.keyWeight)
	if c == 0 {
		c = vtCmp(g.svc+est, g.weight, g.keySvc+g.keyEst, g.keyWeight)
	}
	g.setKeyEst(est)
	h.a[i] = h.node(g)
	switch {
	case c < 0:
		h.up(i)
	case c > 0:
		h.down(i)
	}
}

// up and down move a hole instead of swapping, and set hpos once per moved
// Group.
func (h *groupHeap) up(j int) { h.climb(h.a[j], j, 0) }

// climb places x, whose hole is at j, above every ancestor down to top
// it comes before, and returns where it landed.
func (h *groupHeap) climb(x gnode, j, top int) int {
	a := h.a
	for j > top {
		i := (j - 1) / 2
		b, ok := gFast(&x, &a[i])
		if !ok {
			b = gExact(&x, &a[i])
		}
		if b == 0 {
			break
		}
		a[j] = a[i]
		a[j].g.hpos = j
		j = i
	}
	a[j] = x
	x.g.hpos = j
	return j
}

// down is Floyd's, as entryHeap's: a Group re-keyed at the top after its
// pick mostly belongs near the bottom.
func (h *groupHeap) down(i0 int) bool {
	a := h.a
	i, n := i0, len(a)
	x := a[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n {
			b, ok := gFast(&a[r], &a[l])
			if !ok {
				b = gExact(&a[r], &a[l])
			}
			j += int(b) // no jump on a coin toss
		}
		a[i] = a[j]
		a[i].g.hpos = i
		i = j
	}
	return h.climb(x, i, i0) > i0
}
