package scheduler

import (
	"math"
	"testing"
	"time"
)

// Generations are 32 bits: every 2^31 of a slot, all heaps drop their dead
// nodes, so a node left from 2^32 generations ago cannot pass for live.
func TestGenerationSweep(t *testing.T) {
	for _, start := range []uint32{1<<31 - 2, math.MaxUint32 - 1} {
		s, err := New(Config{Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		mustNil(t, s.SetGroup("g", GroupConfig{Weight: 1}))
		e := s.ents.get()
		e.gen = start
		s.ents.put(e) // "a" takes this slot
		t0 := time.UnixMilli(1_000_000)
		mustNil(t, s.Enqueue(Item{ID: "a", Group: "g"}, t0))
		mustNil(t, s.Enqueue(Item{ID: "b", Group: "g", Urgency: UrgencyHigh}, t0))
		h := &s.groups["g"].heaps[byAging]
		for i, dead := range []int{1, 0} { // "a" is not on top: its old node stays
			u := []Urgency{UrgencyNormal, UrgencyLow}[i]
			mustNil(t, s.Update("a", Change{Urgency: &u}, t0))
			if got := len(h.a) - h.live; got != dead {
				t.Fatalf("generation %#x: %d dead nodes, want %d", e.gen, got, dead)
			}
		}
		for _, want := range []string{"b", "a"} {
			d, ok := s.Next(t0)
			if !ok || d.Item != want {
				t.Fatalf("picked %q (%v), want %q", d.Item, ok, want)
			}
			mustNil(t, s.Finish(want, t0))
		}
	}
}
