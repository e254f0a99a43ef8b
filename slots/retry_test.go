package slots

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestDecideRetry(t *testing.T) {
	pol := protocol.RetryPolicy{MaxAttempts: 4, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 1500, Multiplier: 2}, CostLimit: 5}
	far := t0.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		p        protocol.RetryPolicy
		attempt  uint64
		cost     float64
		deadline time.Time
		want     RetryDecision
	}{
		{"first retry", pol, 1, 0, far, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"doubles", pol, 2, 0, far, RetryDecision{Retry: true, Delay: time.Second}},
		{"capped", pol, 3, 0, far, RetryDecision{Retry: true, Delay: 1500 * time.Millisecond}},
		{"attempts exhausted", pol, 4, 0, far, RetryDecision{Exhausted: ExhaustedAttempts}},
		{"cost below limit", pol, 1, 4.99, far, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"cost at limit", pol, 1, 5, far, RetryDecision{Exhausted: ExhaustedCost}},
		{"zero cost limit, nothing spent", protocol.RetryPolicy{MaxAttempts: 2}, 1, 0, far, RetryDecision{Retry: true}},
		{"zero cost limit, spent", protocol.RetryPolicy{MaxAttempts: 2}, 1, 0.01, far, RetryDecision{Exhausted: ExhaustedCost}},
		{"deadline before next start", pol, 1, 0, t0.Add(500 * time.Millisecond), RetryDecision{Exhausted: ExhaustedDeadline}},
		{"deadline just after", pol, 1, 0, t0.Add(501 * time.Millisecond), RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"no deadline", pol, 1, 0, time.Time{}, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"maxAttempts 0 is 1", protocol.RetryPolicy{}, 1, 0, far, RetryDecision{Exhausted: ExhaustedAttempts}},
		{"multiplier below 1", protocol.RetryPolicy{MaxAttempts: 9, Backoff: protocol.Backoff{InitialMs: 100, Multiplier: 0.5}}, 5, 0, far, RetryDecision{Retry: true, Delay: 100 * time.Millisecond}},
		{"NaN multiplier", protocol.RetryPolicy{MaxAttempts: 9, Backoff: protocol.Backoff{InitialMs: 100, Multiplier: math.NaN()}}, 5, 0, far, RetryDecision{Retry: true, Delay: 100 * time.Millisecond}},
	} {
		if got := DecideRetry(tc.p, tc.attempt, tc.cost, t0, tc.deadline); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Properties: attempts never exceed maxAttempts, delays never decrease
// with the attempt number and never exceed maxMs, and a retry always
// starts before the deadline.
func TestDecideRetryProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := protocol.RetryPolicy{
			MaxAttempts: rapid.Uint64Range(0, 20).Draw(rt, "max"),
			Backoff: protocol.Backoff{
				InitialMs:  rapid.Uint64Range(0, 10_000).Draw(rt, "initial"),
				MaxMs:      rapid.Uint64Range(0, 100_000).Draw(rt, "maxMs"),
				Multiplier: rapid.Float64Range(0, 10).Draw(rt, "mult"),
			},
			CostLimit: rapid.Float64Range(0, 10).Draw(rt, "costLimit"),
		}
		cost := rapid.Float64Range(0, 10).Draw(rt, "cost")
		deadline := t0.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "deadline")))
		prev := time.Duration(-1)
		for a := uint64(1); a <= 25; a++ {
			d := DecideRetry(p, a, cost, t0, deadline)
			if d.Retry {
				if a >= max(p.MaxAttempts, 1) || (cost > 0 && cost >= p.CostLimit) || !t0.Add(d.Delay).Before(deadline) {
					rt.Fatalf("attempt %d retried: %+v", a, d)
				}
				if p.Backoff.MaxMs > 0 && d.Delay > time.Duration(p.Backoff.MaxMs)*time.Millisecond {
					rt.Fatalf("delay %v over maxMs", d.Delay)
				}
				if d.Delay < prev {
					rt.Fatalf("delay decreased: %v after %v", d.Delay, prev)
				}
				prev = d.Delay
			} else if d.Exhausted == "" {
				rt.Fatalf("no retry and no reason at %d", a)
			}
		}
	})
}

var errFlaky = errors.New("flaky")

// A failing attempt is retried after the backoff, on the fake clock, and
// resumes from the previous attempt's checkpoint; exhaustion is Failed
// with evidence.
func TestPoolRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int
		max       uint64
		want      OutcomeKind
		attempts  uint64
		exhausted string
	}{
		{"succeeds on the third attempt", 2, 3, Completed, 3, ""},
		{"exhausted", 5, 3, Failed, 3, ExhaustedAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			a := assignment("g", "wi", "l", "h")
			a.Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: tc.max, Backoff: protocol.Backoff{InitialMs: 1000, MaxMs: 8000, Multiplier: 2}}
			failed := make(chan uint64, 8)
			var resumed []string
			e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
				st, _ := w.Resume()
				resumed = append(resumed, string(st))
				if int(w.Attempt()) <= tc.failures {
					w.Checkpoint(ctx, []byte{byte('0' + w.Attempt())}, checkpoint.Meta{})
					failed <- w.Attempt()
					return Result{}, errFlaky
				}
				return Result{}, nil
			})}
			a.Contract.RequiredCapabilities = caps("h")
			backoffs := backoffSignal(e)
			e.start(t, a)
			for n := uint64(1); n < tc.attempts; n++ {
				<-failed
				waitBackoff(t, backoffs)
				e.advance(time.Duration(500<<n) * time.Millisecond)
				e.advance(time.Duration(500<<n) * time.Millisecond) // sure past 1000·2^(n-1)
			}
			o := e.host.wait(t)
			if o.Kind != tc.want || o.Attempts != tc.attempts {
				t.Fatalf("outcome %v after %d attempts: %s", o.Kind, o.Attempts, o.Reason)
			}
			if tc.exhausted != "" && (!strings.Contains(o.Reason, tc.exhausted) || len(o.Evidence) != 1 || !errors.Is(o.Err, errFlaky)) {
				t.Fatalf("reason %q evidence %v err %v", o.Reason, o.Evidence, o.Err)
			}
			if resumed[0] != "" || resumed[1] != "1" {
				t.Fatalf("attempts resumed from %q", resumed)
			}
		})
	}
}

// The backoff waits for the clock: before the delay no new attempt runs.
func TestBackoffWaitsForClock(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: 2, Backoff: protocol.Backoff{InitialMs: 5000, Multiplier: 1}}
	attempts := make(chan uint64, 4)
	e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
		attempts <- w.Attempt()
		if w.Attempt() == 1 {
			return Result{}, errFlaky
		}
		return Result{}, nil
	})}
	a.Contract.RequiredCapabilities = caps("h")
	backoffs := backoffSignal(e)
	e.start(t, a)
	<-attempts
	waitBackoff(t, backoffs)
	e.advance(4999 * time.Millisecond)
	select {
	case n := <-attempts:
		t.Fatalf("attempt %d ran before the backoff ended", n)
	default:
	}
	e.advance(time.Millisecond)
	if n := <-attempts; n != 2 {
		t.Fatalf("attempt %d", n)
	}
	if o := e.host.wait(t); o.Kind != Completed {
		t.Fatalf("outcome %v", o.Kind)
	}
}

// An attempt past attemptTimeoutMs is cancelled and retried.
func TestAttemptTimeout(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: 2, AttemptTimeoutMs: 60_000}
	started := make(chan uint64, 2)
	e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
		started <- w.Attempt()
		if w.Attempt() == 1 {
			<-ctx.Done()
			return Result{}, context.Cause(ctx)
		}
		return Result{}, nil
	})}
	a.Contract.RequiredCapabilities = caps("h")
	e.start(t, a)
	<-started
	e.advance(time.Minute)
	if n := <-started; n != 2 {
		t.Fatalf("attempt %d", n)
	}
	if o := e.host.wait(t); o.Kind != Completed || o.Attempts != 2 {
		t.Fatalf("outcome %v after %d", o.Kind, o.Attempts)
	}
}

// PriorAttempts from earlier runs count against maxAttempts.
func TestPriorAttempts(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.PriorAttempts = 2
	a.Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: 3}
	o := runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
		if w.Attempt() != 3 {
			t.Errorf("attempt %d", w.Attempt())
		}
		return Result{}, errFlaky
	})
	if o.Kind != Failed || o.Attempts != 1 {
		t.Fatalf("outcome %v %d", o.Kind, o.Attempts)
	}
}

// waitBackoff waits until the run has entered its backoff, so that a clock
// step lands after the delay was set.
func waitBackoff(t *testing.T, backoffs <-chan struct{}) {
	t.Helper()
	select {
	case <-backoffs:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never entered backoff")
	}
}

// backoffSignal makes the pool report each entry into backoff.
func backoffSignal(e *env) <-chan struct{} {
	ch := make(chan struct{}, 16)
	e.pool.onBackoff = func() { ch <- struct{}{} }
	return ch
}
