package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The group heap's node comparison is keyLess, also where the float keys
// tie, past lim and past 2^53.
func TestGroupNodeOrderIsKeyLess(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	svcs := []int64{0, 1, 2, 3, 6, 7, 1 << 30, 1<<31 + 1, 1<<53 + 1, 1<<53 + 3, 3<<53 + 10, 1 << 62}
	for round := range 200 {
		var h groupHeap
		gs := make([]*group, 40)
		for i := range gs {
			g := newGroup(fmt.Sprintf("g%02d", r.IntN(20)), nil)
			g.weight = []int64{1, 2, 3, 6, 8, maxWeight}[r.IntN(6)]
			if round%2 == 0 {
				g.weight = 1 + r.Int64N(8)
			}
			g.svc = svcs[r.IntN(len(svcs))] * g.weight / (1 + r.Int64N(3))
			if r.IntN(2) == 0 {
				g.svc += r.Int64N(1000)
			}
			g.setKeyEst(r.Int64N(3) * 50)
			h.noteWeight(g.weight)
			gs[i] = g
		}
		for _, x := range gs {
			for _, y := range gs {
				nx, ny := h.node(x), h.node(y)
				b, ok := gFast(&nx, &ny)
				if !ok {
					b = gExact(&nx, &ny)
				}
				if (b == 1) != keyLess(x, y) {
					t.Fatalf("round %d: %s (svc %d w %d est %d) before %s (svc %d w %d est %d): %d, keyLess %v",
						round, x.id, x.svc, x.weight, x.keyEst, y.id, y.svc, y.weight, y.keyEst, b, keyLess(x, y))
				}
			}
		}
	}
}

// Ready Groups come out of the heap in keyLess order, whatever the order
// they went in and were re-keyed.
func TestGroupHeapOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 100 {
		var h groupHeap
		gs := make([]*group, 1+r.IntN(60))
		for i := range gs {
			gs[i] = newGroup(fmt.Sprintf("g%03d", i), nil)
			gs[i].weight = 1 + r.Int64N(8)
			h.noteWeight(gs[i].weight)
			gs[i].svc = r.Int64N(20) * 8
			h.push(gs[i])
		}
		for range 3 * len(gs) {
			g := gs[r.IntN(len(gs))]
			if g.hpos < 0 {
				h.push(g)
				continue
			}
			switch r.IntN(3) {
			case 0:
				h.remove(g)
			default:
				g.svc += r.Int64N(40) - 16
				g.svc = max(g.svc, 0)
				h.fix(g.hpos)
			}
		}
		var prev *group
		for g := h.top(); g != nil; g = h.top() {
			if prev != nil && keyLess(g, prev) {
				t.Fatalf("round %d: %s came after %s", round, g.id, prev.id)
			}
			prev = g
			h.remove(g)
		}
	}
}
