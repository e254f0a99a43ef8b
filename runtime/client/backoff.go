package client

import (
	"math"
	"time"
)

// Jitter chooses how Backoff spreads reconnect delays, so that many workers
// cut off by the same authority restart do not reconnect in lockstep.
type Jitter uint8

const (
	// JitterFull draws the delay uniformly from [0, min(Cap, Base·2^attempt)).
	JitterFull Jitter = iota
	// JitterDecorrelated draws it uniformly from [Base, min(Cap, 3·prev)),
	// prev being the previous delay (at least Base).
	JitterDecorrelated
	// JitterNone waits exactly min(Cap, Base·2^attempt); tests only.
	JitterNone
)

// Backoff is the reconnect delay policy: capped exponential growth with
// jitter. The zero value reconnects at once.
type Backoff struct {
	Base   time.Duration
	Cap    time.Duration // below Base means Base
	Jitter Jitter
}

// defaultBackoff is used when Config.Backoff is the zero value.
var defaultBackoff = Backoff{Base: 250 * time.Millisecond, Cap: 30 * time.Second, Jitter: JitterFull}

// delay returns the wait before reconnect attempt number attempt (0 for the
// first retry after a failure). prev is the delay returned for the previous
// attempt (used by JitterDecorrelated) and u a uniform random draw in
// [0, 1); passing the draw in keeps delay a pure function. Values of u
// outside [0, 1) are clamped.
func (b Backoff) delay(attempt int, prev time.Duration, u float64) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	capd := max(b.Cap, b.Base)
	if !(u >= 0) { // also catches NaN
		u = 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	switch b.Jitter {
	case JitterDecorrelated:
		hi := min(capd, sat3(max(prev, b.Base)))
		return b.Base + time.Duration(u*float64(hi-b.Base))
	case JitterNone:
		return expCeil(b.Base, capd, attempt)
	default:
		return time.Duration(u * float64(expCeil(b.Base, capd, attempt)))
	}
}

// afterRefusal is the wait before redialing an authority that refused the
// last attempt and said when to come back (retry: a 503's Retry-After, a
// RATE_LIMITED HELLO's retryAfterMs). Redialing sooner only takes another
// of its refusal slots, and every client it refused at once was told the
// same time, so the wait is drawn uniformly from [retry, 2·retry) by u:
// they come back spread, not in lockstep. It is never shorter than backoff
// (the jittered delay of this attempt) and at most maxRetryAfter.
func afterRefusal(retry, backoff time.Duration, u float64) time.Duration {
	if !(u >= 0) || u >= 1 {
		u = 0
	}
	retry = min(max(retry, 0), maxRetryAfter)
	return min(max(backoff, retry+time.Duration(u*float64(retry))), maxRetryAfter)
}

// maxRetryAfter bounds how long an authority's Retry-After holds off a
// redial, as for BACKPRESSURE.
const maxRetryAfter = 10 * time.Minute

// expCeil is min(capd, base·2^attempt) without overflow.
func expCeil(base, capd time.Duration, attempt int) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	d := base
	for range attempt {
		if d >= capd/2 {
			return capd
		}
		d *= 2
	}
	return min(d, capd)
}

func sat3(d time.Duration) time.Duration {
	if d > math.MaxInt64/3 {
		return math.MaxInt64
	}
	return 3 * d
}
