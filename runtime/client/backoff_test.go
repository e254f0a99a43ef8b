package client

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffDelayTable(t *testing.T) {
	const ms = time.Millisecond
	full := Backoff{Base: 100 * ms, Cap: 1000 * ms, Jitter: JitterFull}
	none := Backoff{Base: 100 * ms, Cap: 1000 * ms, Jitter: JitterNone}
	dec := Backoff{Base: 100 * ms, Cap: 1000 * ms, Jitter: JitterDecorrelated}
	tests := []struct {
		name    string
		b       Backoff
		attempt int
		prev    time.Duration
		u       float64
		want    time.Duration
	}{
		{"zero policy reconnects at once", Backoff{}, 5, 0, 0.9, 0},
		{"none attempt 0", none, 0, 0, 0.5, 100 * ms},
		{"none attempt 1", none, 1, 0, 0.5, 200 * ms},
		{"none attempt 3", none, 3, 0, 0.5, 800 * ms},
		{"none capped", none, 4, 0, 0.5, 1000 * ms},
		{"none huge attempt stays capped", none, 1 << 20, 0, 0.5, 1000 * ms},
		{"none negative attempt", none, -3, 0, 0.5, 100 * ms},
		{"full lower edge", full, 2, 0, 0, 0},
		{"full half of 400ms", full, 2, 0, 0.5, 200 * ms},
		{"full half of cap", full, 10, 0, 0.5, 500 * ms},
		{"full u clamped above", full, 0, 0, 7, 100*ms - 1},
		{"full u NaN is 0", full, 0, 0, math.NaN(), 0},
		{"full u negative is 0", full, 3, 0, -1, 0},
		{"decorrelated first draw spans base..3base", dec, 0, 0, 0.5, 200 * ms},
		{"decorrelated grows from prev", dec, 1, 300 * ms, 0.5, 500 * ms},
		{"decorrelated capped", dec, 9, 900 * ms, 0.5, 550 * ms},
		{"decorrelated lower edge is base", dec, 9, 900 * ms, 0, 100 * ms},
		{"decorrelated huge prev no overflow", dec, 9, math.MaxInt64, 0.5, 550 * ms},
		{"cap below base means base", Backoff{Base: 100 * ms, Cap: 10 * ms, Jitter: JitterNone}, 4, 0, 0, 100 * ms},
		{"no cap overflow at large base", Backoff{Base: math.MaxInt64 / 4, Cap: math.MaxInt64, Jitter: JitterNone}, 5, 0, 0, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.delay(tt.attempt, tt.prev, tt.u); got != tt.want {
				t.Fatalf("delay(%d, %v, %v) = %v, want %v", tt.attempt, tt.prev, tt.u, got, tt.want)
			}
		})
	}
}

// TestBackoffBounds checks the documented ranges over many random draws.
func TestBackoffBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, j := range []Jitter{JitterFull, JitterDecorrelated, JitterNone} {
		b := Backoff{Base: time.Duration(1 + r.IntN(1000)), Cap: time.Duration(1 + r.IntN(100000)), Jitter: j}
		var prev time.Duration
		for attempt := range 200 {
			d := b.delay(attempt, prev, r.Float64())
			capd := max(b.Cap, b.Base)
			if d < 0 || d > capd {
				t.Fatalf("jitter %d attempt %d: delay %v outside [0, %v]", j, attempt, d, capd)
			}
			if j == JitterDecorrelated && d < b.Base {
				t.Fatalf("decorrelated delay %v below base %v", d, b.Base)
			}
			prev = d
		}
	}
}

// After a refusal that said when to come back, the wait is drawn from
// [retry, 2·retry): clients refused together come back spread. Never
// below the attempt's own backoff, never over maxRetryAfter.
func TestAfterRefusalTable(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name           string
		retry, backoff time.Duration
		u              float64
		want           time.Duration
	}{
		{"lower edge is the retry", 10 * s, 0, 0, 10 * s},
		{"half a draw adds half", 10 * s, 0, 0.5, 15 * s},
		{"upper edge below twice", 10 * s, 0, math.Nextafter(1, 0), 20*s - 1},
		{"a longer backoff wins", 1 * s, 5 * s, 0.5, 5 * s},
		{"u out of range is 0", 10 * s, 0, 7, 10 * s},
		{"u NaN is 0", 10 * s, 0, math.NaN(), 10 * s},
		{"negative retry is none", -s, 3 * s, 0.5, 3 * s},
		{"capped", maxRetryAfter, 0, 0.5, maxRetryAfter},
		{"huge retry capped", math.MaxInt64, 0, 0.9, maxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := afterRefusal(tt.retry, tt.backoff, tt.u); got != tt.want {
				t.Fatalf("afterRefusal(%v, %v, %v) = %v, want %v", tt.retry, tt.backoff, tt.u, got, tt.want)
			}
		})
	}
}
