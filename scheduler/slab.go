package scheduler

// slab holds every entry in chunks of slabChunk, addressed by an int32. The
// item index and the heap nodes name entries by that number instead of a
// pointer: an index slot is 8 bytes instead of 16 and a node 32 instead of
// 40 (two to a cache line). Chunks never move, so an *entry
// stays valid while its slot is in use (slots, their promises and callers keep
// pointers). Freed slots are reused last-in first-out, while still in
// cache; the slab keeps its peak size.
type slab struct {
	chunks []*[slabChunk]entry
	free   []int32
	n      int32 // slots handed out at least once
}

const (
	slabShift = 8
	slabChunk = 1 << slabShift // 64 KiB of entries
)

func (x *slab) at(i int32) *entry {
	return &x.chunks[i>>slabShift][i&(slabChunk-1)]
}

// get returns a zeroed entry (but for its slot number and generation).
func (x *slab) get() *entry {
	if n := len(x.free); n > 0 {
		i := x.free[n-1]
		x.free = x.free[:n-1]
		return x.at(i)
	}
	i := x.n
	if int(i>>slabShift) == len(x.chunks) {
		x.chunks = append(x.chunks, new([slabChunk]entry))
	}
	x.n++
	e := x.at(i)
	e.self = i
	return e
}

// put clears e for reuse. Its generation stays: dead nodes that still name
// the slot carry an older one.
func (x *slab) put(e *entry) {
	self, gen := e.self, e.gen
	*e = entry{self: self, gen: gen}
	x.free = append(x.free, self)
}
