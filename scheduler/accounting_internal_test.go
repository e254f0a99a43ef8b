package scheduler

import (
	"errors"
	"testing"
	"time"
)

// A running item is charged max(elapsed, estimate) as time passes, and its
// actual slot-time when it ends.
func TestSettleCharges(t *testing.T) {
	s, err := New(Config{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustNil(t, s.SetGroup("g", GroupConfig{Weight: 1}))
	t0 := time.UnixMilli(1_000_000)
	mustNil(t, s.Enqueue(Item{ID: "x", Group: "g", Estimate: 10 * time.Millisecond}, t0))
	if _, ok := s.Next(t0); !ok {
		t.Fatal("nothing started")
	}
	g := s.groups["g"]
	for _, step := range []struct{ at, svc int64 }{{5, 10}, {100, 100}, {250, 250}, {250, 250}} {
		s.settle(1_000_000 + step.at)
		if g.svc != step.svc {
			t.Fatalf("at +%d ms: svc %d, want %d", step.at, g.svc, step.svc)
		}
	}
	mustNil(t, s.Finish("x", t0.Add(300*time.Millisecond)))
	if g.svc != 300 {
		t.Fatalf("after finishing at +300 ms: svc %d, want 300", g.svc)
	}
}

// A Group that comes back under its quota while it still runs items keeps at
// most one quota's worth of runs of credit behind the virtual time.
func TestQuotaRejoinCredit(t *testing.T) {
	s, err := New(Config{Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	mustNil(t, s.SetGroup("a", GroupConfig{Weight: 1, Quota: 2}))
	t0 := time.UnixMilli(1_000_000)
	for _, id := range []string{"a1", "a2", "a3"} {
		mustNil(t, s.Enqueue(Item{ID: id, Group: "a", Estimate: 100 * time.Millisecond}, t0))
	}
	for range 2 {
		if _, ok := s.Next(t0); !ok {
			t.Fatal("nothing started")
		}
	}
	g := s.groups["a"]
	if g.hpos >= 0 {
		t.Fatal("a Group at its quota is still ready")
	}
	// Other Groups have run far ahead meanwhile.
	s.vNum, s.vDen = 100_000, 1
	mustNil(t, s.Finish("a1", t0.Add(10*time.Millisecond))) // observed mean 10 ms
	// The virtual time at a's weight (1 × the normal class's 2), less two runs of 10 ms.
	if want := 100_000*g.weight - 2*10; g.svc != want {
		t.Fatalf("svc %d after rejoining, want %d", g.svc, want)
	}
}

func TestGroupWeightBound(t *testing.T) {
	s, err := New(Config{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustNil(t, s.SetGroup("g", GroupConfig{Weight: maxWeight / 8, Class: ClassCritical}))
	if err := s.SetGroup("g", GroupConfig{Weight: maxWeight/8 + 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("weight %d: %v, want ErrInvalid", maxWeight/8+1, err)
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
