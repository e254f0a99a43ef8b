package clock

import (
	"testing"
	"time"
)

func TestFakeAdvance(t *testing.T) {
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f := NewFake(start)
	f.Advance(1500 * time.Millisecond)
	if got := f.Now().Sub(start); got != 1500*time.Millisecond {
		t.Fatalf("advanced %v, want 1.5s", got)
	}
	f.Set(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Set did not move the clock")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("negative advance must panic")
		}
	}()
	f.Advance(-1)
}
