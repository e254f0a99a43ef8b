package slots

import (
	"math"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Why retries stop (RetryDecision.Exhausted).
const (
	ExhaustedAttempts = "maxAttempts"
	ExhaustedCost     = "costLimit"
	ExhaustedDeadline = "deadline"
)

// RetryDecision says whether to run another attempt, and when.
type RetryDecision struct {
	Retry bool
	Delay time.Duration
	// Exhausted names the bound that stopped retries when Retry is false.
	Exhausted string
}

// DecideRetry decides after attempt number attempt (1-based, counting
// every attempt of the WorkItem) has failed, with cost money spent so far:
// retry while attempts remain under maxAttempts (0 counts as 1), the
// money spent is below costLimit (with a costLimit of 0, only while
// nothing was spent), and the next attempt would start before the
// deadline (a zero deadline is none). The delay is initialMs ×
// multiplier^(attempt−1), capped at maxMs (0: uncapped); a multiplier below 1 counts as
// 1. It is pure: same inputs, same decision.
func DecideRetry(p protocol.RetryPolicy, attempt uint64, cost float64, now, deadline time.Time) RetryDecision {
	if attempt >= max(p.MaxAttempts, 1) {
		return RetryDecision{Exhausted: ExhaustedAttempts}
	}
	if cost > 0 && cost >= p.CostLimit {
		return RetryDecision{Exhausted: ExhaustedCost}
	}
	d := backoff(p.Backoff, attempt)
	if !deadline.IsZero() && !now.Add(d).Before(deadline) {
		return RetryDecision{Exhausted: ExhaustedDeadline}
	}
	return RetryDecision{Retry: true, Delay: d}
}

// backoff is the delay after the n-th failed attempt.
func backoff(b protocol.Backoff, n uint64) time.Duration {
	mult := b.Multiplier
	if !(mult >= 1) { // also NaN
		mult = 1
	}
	n = max(n, 1)
	ms := float64(b.InitialMs) * math.Pow(mult, float64(n-1))
	if b.MaxMs > 0 && ms > float64(b.MaxMs) {
		ms = float64(b.MaxMs)
	}
	// Beyond ~292 years a Duration overflows; no real policy gets there
	// without maxMs, but the result must stay positive.
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
