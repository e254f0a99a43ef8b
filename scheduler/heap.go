package scheduler

// An entry sits in up to three per-Group heaps at once; pos[k] is its index in
// heap k (-1 when absent) so removal and re-keying are O(log n) without search.
const (
	byAging    = iota // every eligible item, by aging key
	byDeadline        // deadline items with short slack, by deadline (EDF)
	byLatest          // other deadline items, by latest start (deadline − estimate)
	heapKinds
)

type entryHeap struct {
	a    []*entry
	kind int
}

func (h *entryHeap) less(x, y *entry) bool {
	switch h.kind {
	case byAging:
		if x.ta != y.ta {
			return x.ta < y.ta
		}
	case byDeadline:
		if x.dl != y.dl {
			return x.dl < y.dl
		}
	default:
		if x.latest() != y.latest() {
			return x.latest() < y.latest()
		}
	}
	return x.seq < y.seq
}

func (h *entryHeap) len() int { return len(h.a) }

func (h *entryHeap) top() *entry {
	if len(h.a) == 0 {
		return nil
	}
	return h.a[0]
}

func (h *entryHeap) push(e *entry) {
	e.pos[h.kind] = int32(len(h.a))
	h.a = append(h.a, e)
	h.up(len(h.a) - 1)
}

func (h *entryHeap) remove(e *entry) {
	i := int(e.pos[h.kind])
	if i < 0 {
		return
	}
	n := len(h.a) - 1
	if i != n {
		h.swap(i, n)
	}
	h.a[n] = nil
	h.a = h.a[:n]
	e.pos[h.kind] = -1
	if i != n {
		h.fix(i)
	}
}

func (h *entryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *entryHeap) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.a[i].pos[h.kind] = int32(i)
	h.a[j].pos[h.kind] = int32(j)
}

func (h *entryHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *entryHeap) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.a[r], h.a[l]) {
			j = r
		}
		if !h.less(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// groupHeap orders ready Groups by virtual time (service / weight), then id.
type groupHeap struct{ a []*group }

func (h *groupHeap) top() *group {
	if len(h.a) == 0 {
		return nil
	}
	return h.a[0]
}

func (h *groupHeap) push(g *group) {
	g.setKey()
	g.hpos = len(h.a)
	h.a = append(h.a, g)
	h.up(len(h.a) - 1)
}

func (h *groupHeap) remove(g *group) {
	i := g.hpos
	if i < 0 {
		return
	}
	n := len(h.a) - 1
	if i != n {
		h.swap(i, n)
	}
	h.a[n] = nil
	h.a = h.a[:n]
	g.hpos = -1
	if i != n {
		h.fix(i)
	}
}

func (h *groupHeap) fix(i int) {
	h.a[i].setKey()
	if !h.down(i) {
		h.up(i)
	}
}

func (h *groupHeap) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.a[i].hpos = i
	h.a[j].hpos = j
}

func (h *groupHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !keyLess(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *groupHeap) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && keyLess(h.a[r], h.a[l]) {
			j = r
		}
		if !keyLess(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
