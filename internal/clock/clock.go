// Package clock is the one source of time for decision logic. Production code
// takes a Clock; tests step a Fake, so lease expiry, offer expiry, aging and
// grace windows are tested without sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// Timer is the part of *time.Timer that waiting code uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Timers is a Clock that also makes timers. Code that waits (the worker's
// loop and its connection to the authority) takes one, so that a test's
// Fake decides when its pings, pauses and ticks happen.
type Timers interface {
	Clock
	NewTimer(d time.Duration) Timer
}

// Real reads the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a manually advanced clock, safe for concurrent use. Its timers
// fire only when Advance or Set reaches them.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]bool
}

// NewFake returns a Fake set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires once the fake reaches now+d; at
// once when d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	if f.timers == nil {
		f.timers = map[*fakeTimer]bool{}
	}
	f.timers[t] = true
	return t
}

// Advance moves the fake forward by d (d may not be negative).
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: negative advance")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the fake to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

// Step moves the fake's wall time by d, forward or back, as an operator or
// NTP stepping a machine's clock does: pending timers keep the time they
// have left (real timers measure elapsed time, which a step does not
// change), so none fires for the step and none is put off by it.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for tm := range f.timers {
		tm.at = tm.at.Add(d)
	}
}

// setLocked moves the clock and fires the timers it reached; each timer's
// channel has room for its one value, so this never blocks.
func (f *Fake) setLocked(t time.Time) {
	f.now = t
	for tm := range f.timers {
		if !tm.at.After(f.now) {
			tm.c <- f.now
			delete(f.timers, tm)
		}
	}
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop reports whether it stopped the timer before it fired.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.f.timers[t]
	delete(t.f.timers, t)
	return active
}
