package scheduler

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// The item index against a Go map over random inserts, duplicate inserts,
// lookups and removals (growth and backward-shift deletion included).
func TestPropertyIndexMatchesMap(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var ents slab
		x := newIndex(&ents)
		want := map[string]*entry{}
		ids := rapid.IntRange(1, 400).Draw(t, "ids")
		for range rapid.IntRange(1, 2000).Draw(t, "ops") {
			id := fmt.Sprintf("i%d", rapid.IntRange(0, ids-1).Draw(t, "id"))
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				e := ents.get()
				e.item.ID = id
				old := x.insert(e)
				if old != want[id] {
					t.Fatalf("insert %s: index returned %p, map holds %p", id, old, want[id])
				}
				if old == nil {
					want[id] = e
				} else {
					ents.put(e)
				}
			case 1:
				if e := want[id]; e != nil {
					x.remove(e)
					delete(want, id)
					ents.put(e)
				}
			}
			if got := x.get(id); got != want[id] {
				t.Fatalf("get %s: %p, want %p", id, got, want[id])
			}
			if x.n != len(want) {
				t.Fatalf("%d entries, want %d", x.n, len(want))
			}
		}
		for id, e := range want {
			if x.get(id) != e {
				t.Fatalf("get %s lost", id)
			}
		}
		seen := 0
		x.each(func(e *entry) {
			if want[e.item.ID] != e {
				t.Fatalf("each yields %s, not in the map", e.item.ID)
			}
			seen++
		})
		if seen != len(want) {
			t.Fatalf("each yields %d entries, want %d", seen, len(want))
		}
	})
}
