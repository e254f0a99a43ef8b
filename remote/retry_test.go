package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestTransient(t *testing.T) {
	refused := &url.Error{Op: "Put", URL: "https://127.0.0.1:1/mwp/artifacts/x",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	rateLimited := protocol.Errorf(protocol.CodeRateLimited, "slow down")
	notRetryable := protocol.Errorf(protocol.CodeInternalError, "no")
	notRetryable.Retryable = false
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("remote: PUT /artifacts/x: %w", refused), true},
		{"connection reset", fmt.Errorf("remote: %w", syscall.ECONNRESET), true},
		{"answer cut short", fmt.Errorf("remote: %w", io.ErrUnexpectedEOF), true},
		{"closed before an answer", &url.Error{Op: "Put", URL: "u", Err: io.EOF}, true},
		{"a try's timeout", fmt.Errorf("remote: %w", context.DeadlineExceeded), true},
		{"read timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{"502 page", &HTTPError{Status: 502}, true},
		{"503 page with Retry-After", &HTTPError{Status: 503, RetryAfter: time.Second}, true},
		{"429 page", &HTTPError{Status: 429}, true},
		{"404 page", &HTTPError{Status: 404}, false},
		{"INTERNAL_ERROR", protocol.Errorf(protocol.CodeInternalError, "oops"), true},
		{"RATE_LIMITED", rateLimited, true},
		{"BACKPRESSURE", protocol.Errorf(protocol.CodeBackpressure, "full"), true},
		{"INTERNAL_ERROR not retryable", notRetryable, false},
		{"validation refusal", protocol.Errorf(protocol.CodeSchemaValidationFailed, "bad"), false},
		{"forbidden", fmt.Errorf("wrapped: %w", protocol.Forbidden("no")), false},
		{"caller cancelled", context.Canceled, false},
		{"certificate", errors.New("tls: failed to verify certificate"), false},
		{"nil", nil, false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestPatienceNext(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	refused := fmt.Errorf("remote: %w", syscall.ECONNREFUSED)
	limited := protocol.Errorf(protocol.CodeRateLimited, "slow down")
	limited.Details = map[string]any{"retryAfterMs": float64(3000)}
	p := Patience{Grace: time.Minute, First: 100 * time.Millisecond, Max: time.Second}
	for _, c := range []struct {
		name   string
		p      Patience
		err    error
		tries  int
		now    time.Time
		jitter float64
		want   Decision
		wait   time.Duration
	}{
		{"first failure, no jitter: half the first wait", p, refused, 1, t0, 0, TryAgain, 50 * time.Millisecond},
		{"first failure, most jitter", p, refused, 1, t0, 0.999, TryAgain, 99_950_000},
		{"doubles per try", p, refused, 3, t0.Add(time.Second), 0.5, TryAgain, 300 * time.Millisecond},
		{"capped at Max", p, refused, 30, t0.Add(10 * time.Second), 1, TryAgain, time.Second},
		{"Retry-After is waited at least", p, limited, 1, t0, 0, TryAgain, 3 * time.Second},
		{"503 page's Retry-After", p, &HTTPError{Status: 503, RetryAfter: 2 * time.Second}, 2, t0, 0, TryAgain, 2 * time.Second},
		{"the last try falls at the end of the grace", p, refused, 40, t0.Add(time.Minute - 300*time.Millisecond), 1, TryAgain, 300 * time.Millisecond},
		{"grace over", p, refused, 41, t0.Add(time.Minute), 0, OutOfPatience, 0},
		{"no grace: the first failure is the last", Patience{}, refused, 1, t0, 0, OutOfPatience, 0},
		{"defaults", Patience{Grace: time.Minute}, refused, 1, t0, 0, TryAgain, DefaultFirstRetry / 2},
		{"default cap", Patience{Grace: time.Hour}, refused, 60, t0, 1, TryAgain, DefaultMaxRetry},
		{"a refusal is returned at once", p, protocol.Errorf(protocol.CodeInvalidCommand, "bad digest"), 1, t0, 0, Refused, 0},
		{"a 4xx page is returned at once", p, &HTTPError{Status: 413}, 1, t0, 0, Refused, 0},
	} {
		d, wait := c.p.Next(c.err, c.tries, t0, c.now, c.jitter)
		if d != c.want || wait != c.wait {
			t.Errorf("%s: Next = %v %v, want %v %v", c.name, d, wait, c.want, c.wait)
		}
	}
}

// Retry's back-off, in a synctest bubble: an authority refusing the
// first tries is waited out (the waits as Next says, on the clock given),
// one that stays away past the grace gives the retryable Unreachable
// error, and a refusal is returned after its one try.
func TestRetry(t *testing.T) {
	refused := fmt.Errorf("remote: %w", syscall.ECONNREFUSED)
	p := Patience{Grace: 10 * time.Second, First: 100 * time.Millisecond, Max: 2 * time.Second}
	half := func() float64 { return 0.5 }
	for _, c := range []struct {
		name      string
		failures  int   // tries that fail before one succeeds
		err       error // what they fail with
		wantTries int
		wantCode  protocol.Code // "" for success
		retryable bool
		wantTook  time.Duration
	}{
		// Waits 75, 150, 300ms: 525ms in all.
		{"refused three times, then accepted", 3, refused, 4, "", false, 525 * time.Millisecond},
		// Tries at 0, 75, 225, 525, 1125, 2325, 3825, 5325, 6825, 8325,
		// 9825 and, cut to the grace's end, 10000ms.
		{"refused for longer than the grace", 1000, refused, 12, protocol.CodeInternalError, true, 10 * time.Second},
		{"a definitive refusal", 1000, protocol.Errorf(protocol.CodeSchemaValidationFailed, "bad"), 1, protocol.CodeSchemaValidationFailed, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := clock.Real{}
				start := ts.Now()
				tries, told := 0, 0
				err := Retry(context.Background(), ts, p, half, func(n int, wait time.Duration, err error) { told++ }, func(context.Context) error {
					tries++
					if tries <= c.failures {
						return c.err
					}
					return nil
				})
				if tries != c.wantTries {
					t.Errorf("%d tries, want %d", tries, c.wantTries)
				}
				if told != tries-1 {
					t.Errorf("told of %d waits, want %d", told, tries-1)
				}
				if took := ts.Now().Sub(start); took != c.wantTook {
					t.Errorf("took %v, want %v", took, c.wantTook)
				}
				if c.wantCode == "" {
					if err != nil {
						t.Fatalf("Retry = %v", err)
					}
					return
				}
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != c.wantCode || pe.Retryable != c.retryable {
					t.Fatalf("Retry = %#v, want %s retryable=%v", err, c.wantCode, c.retryable)
				}
				if c.retryable && (pe.Details["reason"] != ReasonUnreachable || pe.Details["tries"] != int64(c.wantTries)) {
					t.Fatalf("details %v", pe.Details)
				}
			})
		})
	}
}

// A context that ends while Retry waits ends it with the context's error.
func TestRetryCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := Retry(ctx, clock.Real{}, Patience{Grace: time.Minute}, func() float64 { return 0 }, nil, func(context.Context) error {
			return syscall.ECONNREFUSED
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Retry = %v, want the context's deadline", err)
		}
	})
}
