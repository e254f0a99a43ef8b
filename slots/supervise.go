package slots

import (
	"fmt"
	"time"
)

// phase is where a run is between attempts.
type phase int

const (
	phaseRunning phase = iota // a handler attempt is running
	phaseBackoff              // waiting for the next attempt
)

// view is what supervision needs to know about a run at one instant.
type view struct {
	phase          phase
	now            time.Time
	startedAt      time.Time // start of the run
	leaseExpires   time.Time
	attemptStart   time.Time
	nextAttempt    time.Time
	preemptAt      time.Time // zero: no stop request (preemption, lease loss, shutdown)
	lostAt         time.Time // zero: no lease-loss request
	preemptTimeout time.Duration
	attemptTimeout time.Duration // 0: none
	wallLimit      time.Duration // 0: none
	killed         bool
}

// act is what supervision does to a run.
type act int

const (
	actNone   act = iota
	actCancel     // end the attempt (final: end the run)
	actWake       // the backoff delay is over: start the next attempt
)

type action struct {
	act    act
	final  bool
	reason string
}

// supervise decides, purely from v, whether a run must be cancelled or
// woken. A handler is never stopped at an unsafe point for scheduling
// reasons (spec 11.3): a preemption or shutdown request is only a request,
// however long it waits. Only an expired lease, an exhausted wall-clock
// budget, a lease-loss request left unanswered past the hard timeout, or
// an attempt past its own timeout cancel it.
func supervise(v view) action {
	if v.killed {
		return action{}
	}
	if !v.now.Before(v.leaseExpires) {
		return action{act: actCancel, final: true, reason: "execution lease expired"}
	}
	if v.wallLimit > 0 && v.now.Sub(v.startedAt) >= v.wallLimit {
		return action{act: actCancel, final: true, reason: "wallClockSeconds budget exhausted"}
	}
	switch v.phase {
	case phaseRunning:
		if !v.lostAt.IsZero() && v.now.Sub(v.lostAt) >= v.preemptTimeout {
			return action{act: actCancel, final: true, reason: fmt.Sprintf("no safe point within %v of the lease loss", v.preemptTimeout)}
		}
		if v.attemptTimeout > 0 && v.now.Sub(v.attemptStart) >= v.attemptTimeout {
			return action{act: actCancel, reason: fmt.Sprintf("attempt timed out after %v", v.attemptTimeout)}
		}
	case phaseBackoff:
		if !v.now.Before(v.nextAttempt) || !v.preemptAt.IsZero() {
			return action{act: actWake}
		}
	}
	return action{}
}
