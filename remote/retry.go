package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// Outages: a request the authority could not take (it was restarting,
// unreachable, overloaded) is made again, within a bounded patience, when
// making it twice is safe — an artifact's PUT or GET is content-addressed.
// Which errors are an outage is Transient; when to try again is
// Patience.Next, pure; the loop is Retry.

// HTTPError is an answer that is not the authority's Error object (a
// proxy's or a load balancer's page): its status and its Retry-After.
type HTTPError struct {
	Status     int
	RetryAfter time.Duration // 0: none given
	Body       string        // its first 200 bytes
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("remote: HTTP %d: %q", e.Status, e.Body)
}

// Transient reports whether err says the authority could not take the
// request for now, so that the same request may succeed later: the
// connection was refused, reset or cut short, a try timed out, an answer
// was a 5xx, 408 or 429 page, or an Error the authority marks retryable
// (INTERNAL_ERROR, BACKPRESSURE, RATE_LIMITED). Anything else — a refusal
// that is an answer (AUTH_FORBIDDEN, INVALID_COMMAND, any 4xx Error), a
// certificate the worker does not trust, the caller's own context ending
// — is not: asking again cannot change it.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Retryable && pe.Code.Retryable()
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500 || he.Status == http.StatusTooManyRequests || he.Status == http.StatusRequestTimeout
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// A dial or a read that failed below TLS (a *net.OpError) is the
	// network's; a TLS alert or certificate error is not an OpError.
	var oe *net.OpError
	return errors.As(err, &oe)
}

// retryAfter is the wait an answer asks for: an Error's
// details.retryAfterMs, or an HTTP answer's Retry-After.
func retryAfter(err error) time.Duration {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		switch ms := pe.Details["retryAfterMs"].(type) {
		case float64:
			return time.Duration(ms) * time.Millisecond
		case int64:
			return time.Duration(ms) * time.Millisecond
		}
		return 0
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.RetryAfter
	}
	return 0
}

// Patience bounds how long a safe request waits out an outage.
type Patience struct {
	// Grace is how long, from the first failed try, tries go on; 0 or
	// less: none after the first (the worker passes its offline grace).
	Grace time.Duration
	// First is the wait after the first failed try (default 200ms); it
	// doubles with every try, up to Max (default 5s). Each wait is drawn
	// between half of it and all of it (jitter), so that the agents
	// behind one restarted authority do not come back in step; a
	// Retry-After asked for by the answer is waited at least.
	First, Max time.Duration
}

// Default waits of Patience.
const (
	DefaultFirstRetry = 200 * time.Millisecond
	DefaultMaxRetry   = 5 * time.Second
)

// Decision is Patience.Next's answer.
type Decision int

const (
	// TryAgain: wait Wait, then make the request again.
	TryAgain Decision = iota
	// Refused: the error is an answer (not Transient); return it now.
	Refused
	// OutOfPatience: the grace is over; return a retryable Unreachable
	// error.
	OutOfPatience
)

func (d Decision) String() string {
	switch d {
	case TryAgain:
		return "try again"
	case Refused:
		return "refused"
	}
	return "out of patience"
}

// Next decides after the tries-th try (1-based) failed with err at now,
// the first of them having failed at first; jitter is a number in [0, 1)
// (the caller's random source, so that Next stays pure). The wait is
// First·2^(tries−1), capped at Max, scaled into [½, 1) of itself by
// jitter, raised to the answer's Retry-After, and cut so that the last
// try falls at first+Grace: no try starts after it.
func (p Patience) Next(err error, tries int, first, now time.Time, jitter float64) (Decision, time.Duration) {
	if !Transient(err) {
		return Refused, 0
	}
	end := first.Add(p.Grace)
	left := end.Sub(now)
	if p.Grace <= 0 || left <= 0 {
		return OutOfPatience, 0
	}
	initial, most := p.First, p.Max
	if initial <= 0 {
		initial = DefaultFirstRetry
	}
	if most <= 0 {
		most = DefaultMaxRetry
	}
	most = max(most, initial)
	wait := initial
	for n := 1; n < tries && wait < most; n++ {
		wait *= 2
	}
	wait = min(wait, most)
	jitter = min(max(jitter, 0), 1)
	wait = wait/2 + time.Duration(float64(wait/2)*jitter)
	wait = max(wait, retryAfter(err))
	return TryAgain, min(wait, left)
}

// Unreachable is the error of a request that found the authority
// unreachable for the whole of its patience: INTERNAL_ERROR, retryable
// (spec 19: nothing was accepted; the same request may be made again),
// details.reason "authority-unreachable", details.tries and
// details.retryAfterMs (a suggested wait before asking again), and the
// last failure in its message.
func Unreachable(last error, tries int, waited, again time.Duration) *protocol.Error {
	e := protocol.Errorf(protocol.CodeInternalError, "the authority was unreachable for %v (%d tries): %v", waited.Round(time.Millisecond), tries, last)
	e.Details = map[string]any{"reason": ReasonUnreachable, "tries": int64(tries), "retryAfterMs": again.Milliseconds()}
	return e
}

// ReasonUnreachable is details.reason of an Unreachable error.
const ReasonUnreachable = "authority-unreachable"

// Retry calls try until it succeeds, its error is not Transient, or p's
// grace is over (then Unreachable, retryable), waiting on ts between
// tries as p.Next says, with jitter drawn from rnd; waiting is told
// whenever a try failed and another will follow (tries so far, the wait,
// the error). It returns ctx's error when ctx ends first. A nil ts waits
// in real time.
func Retry(ctx context.Context, ts clock.Timers, p Patience, rnd func() float64, waiting func(tries int, wait time.Duration, err error), try func(context.Context) error) error {
	if ts == nil {
		ts = clock.Real{}
	}
	var first time.Time
	for tries := 1; ; tries++ {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := ts.Now()
		if tries == 1 {
			first = now
		}
		d, wait := p.Next(err, tries, first, now, rnd())
		switch d {
		case Refused:
			return err
		case OutOfPatience:
			again := p.First
			if again <= 0 {
				again = DefaultFirstRetry
			}
			return Unreachable(err, tries, now.Sub(first), max(again, retryAfter(err)))
		}
		if waiting != nil {
			waiting(tries, wait, err)
		}
		t := ts.NewTimer(wait)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
