package slots

import (
	"testing"
	"time"
)

func TestSupervise(t *testing.T) {
	base := view{
		phase: phaseRunning, now: t0.Add(time.Minute), startedAt: t0, leaseExpires: t0.Add(time.Hour),
		attemptStart: t0, preemptTimeout: 10 * time.Second,
	}
	for _, tc := range []struct {
		name string
		edit func(*view)
		want action
	}{
		{"nothing to do", func(*view) {}, action{}},
		{"lease expired", func(v *view) { v.now = v.leaseExpires }, action{act: actCancel, final: true, reason: "execution lease expired"}},
		{"already killed", func(v *view) { v.now, v.killed = v.leaseExpires, true }, action{}},
		{"wall clock", func(v *view) { v.wallLimit = time.Minute }, action{act: actCancel, final: true, reason: "wallClockSeconds budget exhausted"}},
		{"wall clock not yet", func(v *view) { v.wallLimit = time.Minute + 1 }, action{}},
		{"preempt within timeout", func(v *view) { v.preemptAt = v.now.Add(-9 * time.Second) }, action{}},
		{"preempt past timeout is never forced", func(v *view) { v.preemptAt = v.now.Add(-time.Hour) }, action{}},
		{"lease lost within timeout", func(v *view) { v.preemptAt, v.lostAt = v.now.Add(-time.Hour), v.now.Add(-9*time.Second) }, action{}},
		{"lease lost past timeout", func(v *view) { v.preemptAt, v.lostAt = v.now.Add(-time.Hour), v.now.Add(-10*time.Second) },
			action{act: actCancel, final: true, reason: "no safe point within 10s of the lease loss"}},
		{"attempt timeout", func(v *view) { v.attemptTimeout = time.Minute }, action{act: actCancel, reason: "attempt timed out after 1m0s"}},
		{"lease before attempt timeout", func(v *view) { v.attemptTimeout, v.now = time.Minute, v.leaseExpires },
			action{act: actCancel, final: true, reason: "execution lease expired"}},
		{"backoff pending", func(v *view) { v.phase, v.nextAttempt = phaseBackoff, v.now.Add(time.Millisecond) }, action{}},
		{"backoff over", func(v *view) { v.phase, v.nextAttempt = phaseBackoff, v.now }, action{act: actWake}},
		{"backoff preempted", func(v *view) { v.phase, v.nextAttempt, v.preemptAt = phaseBackoff, v.now.Add(time.Hour), v.now },
			action{act: actWake}},
		{"backoff ignores attempt timeout", func(v *view) {
			v.phase, v.nextAttempt, v.attemptTimeout = phaseBackoff, v.now.Add(time.Hour), time.Second
		},
			action{}},
		{"backoff past lease", func(v *view) { v.phase, v.nextAttempt, v.now = phaseBackoff, v.now, v.leaseExpires },
			action{act: actCancel, final: true, reason: "execution lease expired"}},
	} {
		v := base
		tc.edit(&v)
		if got := supervise(v); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
