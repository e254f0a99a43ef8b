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

func TestFakeTimers(t *testing.T) {
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f := NewFake(start)
	var _ Timers = f
	var _ Timers = Real{}
	fired := func(tm Timer) bool {
		select {
		case <-tm.C():
			return true
		default:
			return false
		}
	}
	now := f.NewTimer(0)
	if !fired(now) {
		t.Fatal("a timer of 0 did not fire at once")
	}
	a, b, c := f.NewTimer(time.Second), f.NewTimer(2*time.Second), f.NewTimer(3*time.Second)
	f.Advance(999 * time.Millisecond)
	if fired(a) {
		t.Fatal("fired before its time")
	}
	f.Advance(time.Millisecond)
	if !fired(a) || fired(b) {
		t.Fatal("Advance to the deadline fires exactly the timers due")
	}
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop reports true once, for a timer not yet fired")
	}
	f.Set(start.Add(time.Hour))
	if fired(b) || !fired(c) {
		t.Fatal("Set fires the due timers and not the stopped one")
	}
	if c.Stop() {
		t.Fatal("Stop of a fired timer reports true")
	}
}

// A step moves the wall time, not the timers' remaining time: a timer
// set for a second fires a second of Advance later, whichever way the
// clock was stepped.
func TestFakeStep(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		f := NewFake(start)
		tm := f.NewTimer(time.Second)
		f.Step(step)
		if got := f.Now(); !got.Equal(start.Add(step)) {
			t.Fatalf("step %v: now %v", step, got)
		}
		select {
		case <-tm.C():
			t.Fatalf("step %v fired the timer", step)
		default:
		}
		f.Advance(time.Second)
		select {
		case <-tm.C():
		default:
			t.Fatalf("step %v: the timer did not fire a second later", step)
		}
	}
}
