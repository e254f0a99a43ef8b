package scheduler

import "hash/maphash"

// index maps item ids to entries. Go's map needs two hash lookups to insert
// only when absent and another to delete; this open-addressing table with
// linear probing does each in one probe sequence, keeps the hash beside the
// entry so most probes read no entry, and deletes by backward shift (no
// tombstones) starting from the hash the entry keeps. Nothing iterates it
// in an order that reaches a decision.
type index struct {
	seed  maphash.Seed
	slots []islot // length a power of two, at most half full
	n     int
}

type islot struct {
	h uint64
	e *entry // nil: empty
}

func newIndex() index { return index{seed: maphash.MakeSeed(), slots: make([]islot, 64)} }

func (x *index) hash(id string) uint64 { return maphash.String(x.seed, id) }

func (x *index) get(id string) *entry {
	h := x.hash(id)
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.e == nil {
			return nil
		}
		if sl.h == h && sl.e.item.ID == id {
			return sl.e
		}
	}
}

// insert adds e under e.item.ID unless the id is present; it returns the
// entry already there, or nil when e went in.
func (x *index) insert(e *entry) *entry {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	h := x.hash(e.item.ID)
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.e == nil {
			*sl = islot{h, e}
			e.idHash = h
			x.n++
			return nil
		}
		if sl.h == h && sl.e.item.ID == e.item.ID {
			return sl.e
		}
	}
}

// remove takes out e, which must be present.
func (x *index) remove(e *entry) {
	mask := uint64(len(x.slots) - 1)
	i := e.idHash & mask
	for x.slots[i].e != e {
		i = (i + 1) & mask
	}
	// Shift back every later slot of the run that may sit at i, so that
	// probes never meet a hole before their entry.
	for j := (i + 1) & mask; x.slots[j].e != nil; j = (j + 1) & mask {
		home := x.slots[j].h & mask
		if (j-home)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = islot{}
	x.n--
}

func (x *index) grow() {
	old := x.slots
	x.slots = make([]islot, 2*len(old))
	mask := uint64(len(x.slots) - 1)
	for _, sl := range old {
		if sl.e == nil {
			continue
		}
		i := sl.h & mask
		for x.slots[i].e != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = sl
	}
}

// each calls f for every entry, in no meaningful order.
func (x *index) each(f func(*entry)) {
	for _, sl := range x.slots {
		if sl.e != nil {
			f(sl.e)
		}
	}
}
