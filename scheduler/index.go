package scheduler

import "hash/maphash"

// index maps item ids to entries. Go's map needs two hash lookups to insert
// only when absent and another to delete; this open-addressing table with
// linear probing does each in one probe sequence, keeps 32 bits of the hash
// beside the entry's slab number so most probes read no entry, and deletes
// by backward shift (no tombstones) starting from the hash the entry keeps.
// A slot is 8 bytes, so one cache line holds 8. Nothing iterates it in an
// order that reaches a decision.
type index struct {
	seed  maphash.Seed
	ents  *slab
	slots []islot // length a power of two, at most half full
	n     int
}

type islot struct {
	h   uint32
	ref uint32 // slab number + 1; 0: empty
}

func newIndex(ents *slab) index {
	return index{seed: maphash.MakeSeed(), ents: ents, slots: make([]islot, 64)}
}

func (x *index) hash(id string) uint32 { return uint32(maphash.String(x.seed, id)) }

func (x *index) entry(sl islot) *entry { return x.ents.at(int32(sl.ref - 1)) }

func (x *index) get(id string) *entry {
	h := x.hash(id)
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := x.slots[i]
		if sl.ref == 0 {
			return nil
		}
		if sl.h == h {
			if e := x.entry(sl); e.item.ID == id {
				return e
			}
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
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.ref == 0 {
			*sl = islot{h, uint32(e.self) + 1}
			e.idHash = h
			x.n++
			return nil
		}
		if sl.h == h {
			if old := x.entry(*sl); old.item.ID == e.item.ID {
				return old
			}
		}
	}
}

// remove takes out e, which must be present.
func (x *index) remove(e *entry) {
	mask := uint32(len(x.slots) - 1)
	ref := uint32(e.self) + 1
	i := e.idHash & mask
	for x.slots[i].ref != ref {
		i = (i + 1) & mask
	}
	// Shift back every later slot of the run that may sit at i, so that
	// probes never meet a hole before their entry.
	for j := (i + 1) & mask; x.slots[j].ref != 0; j = (j + 1) & mask {
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
	mask := uint32(len(x.slots) - 1)
	for _, sl := range old {
		if sl.ref == 0 {
			continue
		}
		i := sl.h & mask
		for x.slots[i].ref != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = sl
	}
}

// each calls f for every entry, in no meaningful order.
func (x *index) each(f func(*entry)) {
	for _, sl := range x.slots {
		if sl.ref != 0 {
			f(x.entry(sl))
		}
	}
}
