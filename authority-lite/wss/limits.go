package wss

import (
	"crypto/tls"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/missionweave/mwp-worker/protocol"
)

// Connection limits, applied by Serve to every accepted TCP connection
// (docs/wire.md "Limits", docs/operations.md): at most MaxConns at once and
// MaxConnsPerIP per remote address not yet authenticated, each with
// HandshakeTimeout to finish TLS, the upgrade and HELLO. A connection whose
// HELLO succeeded leaves its address's count (it stays in MaxConns): the
// per-address cap is on what an unauthenticated host can hold, as sshd's
// MaxStartups is, so many agents behind one NAT address are bounded by
// MaxConns and not by it. A connection over a cap is not dropped
// silently: it is still accepted, into a small pool of its own, and its
// request is answered with HTTP 503, Retry-After and a JSON error body
// before any upgrade. Only when that pool is full too is a connection
// closed at once: under a flood, holding descriptors to explain the refusal
// would be the lockout the caps exist to prevent.

// Which cap refused a connection (details.limit of the 503 body).
const (
	limitConns      = "maxConns"
	limitConnsPerIP = "maxConnsPerIP"
)

// limitListener counts the connections it accepted until they close.
type limitListener struct {
	net.Listener
	s *Server

	mu       sync.Mutex
	total    int
	perIP    map[string]int // admitted connections not yet authenticated
	refusing int            // connections accepted only to be answered 503
	sessions int            // admitted connections whose HELLO completed, still open
}

func (s *Server) limit(ln net.Listener) *limitListener {
	return &limitListener{Listener: ln, s: s, perIP: map[string]int{}}
}

// refusePool bounds the connections held only to be answered 503.
func (l *limitListener) refusePool() int { return max(16, l.s.opts.MaxConns/16) }

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, ip: remoteIP(c.RemoteAddr())}
		l.mu.Lock()
		switch {
		case l.total >= l.s.opts.MaxConns:
			lc.refused = limitConns
		case l.perIP[lc.ip] >= l.s.opts.MaxConnsPerIP:
			lc.refused = limitConnsPerIP
		}
		if lc.refused != "" && l.refusing >= l.refusePool() {
			l.mu.Unlock()
			l.s.log.Warn("wss: connection closed unanswered: over the connection cap and the refusal pool is full", "remote", c.RemoteAddr())
			_ = c.Close()
			continue
		}
		if lc.refused != "" {
			l.refusing++
		} else {
			l.total++
			l.perIP[lc.ip]++
		}
		l.mu.Unlock()
		lc.mu.Lock() // expire takes it too: the timer field is set first
		lc.timer = time.AfterFunc(l.s.opts.HandshakeTimeout, lc.expire)
		lc.mu.Unlock()
		return lc, nil
	}
}

// counts reports the connections held (tests, diagnostics).
func (l *limitListener) counts() (total, refusing, sessions int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.refusing, l.sessions
}

// limitedConn is one accepted connection and its slot.
type limitedConn struct {
	net.Conn
	l       *limitListener
	ip      string
	refused string // the cap that refused it; "" when admitted

	mu       sync.Mutex
	timer    *time.Timer
	helloed  bool   // HELLO completed: no handshake deadline any more
	authed   bool   // a session's HELLO succeeded: out of its address's count
	released bool   // Close ran
	polite   func() // after the upgrade: close with 1008 instead of dropping
}

// expire ends a connection that has not completed HELLO in time.
func (c *limitedConn) expire() {
	c.mu.Lock()
	if c.helloed || c.released {
		c.mu.Unlock()
		return
	}
	polite := c.polite
	c.mu.Unlock()
	if polite == nil {
		_ = c.Close() // before or during the upgrade: nothing to say it with
		return
	}
	polite()
	// The close handshake is bounded by the library; this is the backstop.
	time.AfterFunc(c.l.s.opts.WriteTimeout, func() { _ = c.Close() })
}

// upgraded records how to close the connection cleanly from now on.
func (c *limitedConn) upgraded(polite func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polite = polite
}

// hello records a completed HELLO: the handshake deadline no longer applies.
func (c *limitedConn) hello() {
	c.mu.Lock()
	first := !c.helloed && !c.released
	c.helloed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	if first {
		c.l.mu.Lock()
		c.l.sessions++
		c.l.mu.Unlock()
	}
}

// authenticated records a session whose HELLO succeeded: the handshake
// deadline stops, and the connection no longer counts toward its address's
// MaxConnsPerIP (it still counts toward MaxConns).
func (c *limitedConn) authenticated() {
	c.hello()
	c.mu.Lock()
	first := !c.authed && !c.released && c.refused == ""
	c.authed = true
	c.mu.Unlock()
	if first {
		c.l.mu.Lock()
		c.l.leaveIPLocked(c.ip)
		c.l.mu.Unlock()
	}
}

// leaveIPLocked takes one connection off ip's count; l.mu is held.
func (l *limitListener) leaveIPLocked(ip string) {
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

func (c *limitedConn) Close() error {
	c.mu.Lock()
	first := !c.released
	c.released = true
	helloed, authed := c.helloed, c.authed
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	if first {
		l := c.l
		l.mu.Lock()
		if helloed {
			l.sessions--
		}
		if c.refused != "" {
			l.refusing--
		} else {
			l.total--
			if !authed {
				l.leaveIPLocked(c.ip)
			}
		}
		l.mu.Unlock()
	}
	return c.Conn.Close()
}

// slotOf finds the limitedConn under an http.Server connection (a TLS
// connection wraps it); nil when the server was not started by Serve.
func slotOf(c net.Conn) *limitedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitedConn)
	return lc
}

type slotKey struct{}

// remoteIP is the address part of a remote address; connections are
// counted per IP address, not per port.
func remoteIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refuse answers a connection over a cap before any upgrade: 503, a
// Retry-After in whole seconds and the error object (error.schema.json) as
// the body. Over MaxConns it is the handshake timeout: by then every
// connection still handshaking has either said HELLO or been closed, so a
// slot may be free (sessions free theirs only when they end). Over
// MaxConnsPerIP it is perIPRetryAfter: that cap counts only handshakes,
// which end in milliseconds unless stalled, and a fleet behind the address
// reconnecting all at once (an authority restart) should not wait ten
// seconds for them; its clients spread their retries (runtime/client).
func (s *Server) refuse(w http.ResponseWriter, limit string) {
	wait := s.opts.HandshakeTimeout
	code, msg := protocol.CodeBackpressure, "the authority holds as many connections as it allows; retry later"
	if limit == limitConnsPerIP {
		wait = min(wait, perIPRetryAfter)
		code, msg = protocol.CodeRateLimited, "this address holds as many unauthenticated connections as the authority allows per address; retry later"
	}
	secs := int(math.Ceil(wait.Seconds()))
	e := protocol.Errorf(code, "%s", msg) // both codes are retryable
	e.Details = map[string]any{"limit": limit, "retryAfterMs": int64(secs) * 1000}
	body, _ := json.Marshal(e)
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// perIPRetryAfter is the Retry-After of a refusal over MaxConnsPerIP.
const perIPRetryAfter = time.Second

// keyedLimiter is a token bucket per key (x/time/rate, fed the Backend's
// clock). Keys whose bucket is full again hold no information and are
// swept when the map has doubled since the last sweep, so its size stays
// proportional to the keys active within one refill.
type keyedLimiter struct {
	every time.Duration
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int
}

func newKeyedLimiter(every time.Duration, burst int) *keyedLimiter {
	return &keyedLimiter{every: every, burst: burst, buckets: map[string]*rate.Limiter{}, sweepAt: 1024}
}

// allow takes one token for key at now; otherwise it returns how long
// until one is available.
func (k *keyedLimiter) allow(key string, now time.Time) (time.Duration, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return take(k.bucketLocked(key, now), now, k.every)
}

// ready reports whether key has a token at now, taking none; otherwise how
// long until it has one. With charge it bounds only what fails: an attempt
// is let in while its key has a token, and only one that failed takes it.
func (k *keyedLimiter) ready(key string, now time.Time) (time.Duration, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		return 0, true
	}
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - tokens) * float64(k.every)), false
}

// charge takes one token for key at now, into debt when there is none:
// attempts that were let in together and failed together all count, so
// the key waits for each of them.
func (k *keyedLimiter) charge(key string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.bucketLocked(key, now).ReserveN(now, 1)
}

// bucketLocked is key's bucket, made full when it has none; k.mu is held.
func (k *keyedLimiter) bucketLocked(key string, now time.Time) *rate.Limiter {
	b := k.buckets[key]
	if b == nil {
		if len(k.buckets) >= k.sweepAt {
			for key, b := range k.buckets {
				if b.TokensAt(now) >= float64(k.burst) {
					delete(k.buckets, key)
				}
			}
			k.sweepAt = max(1024, 2*len(k.buckets))
		}
		b = rate.NewLimiter(rate.Every(k.every), k.burst)
		k.buckets[key] = b
	}
	return b
}

// take reserves one token at now, or cancels the reservation and reports
// the wait.
func take(b *rate.Limiter, now time.Time, every time.Duration) (time.Duration, bool) {
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return every, false
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// rateLimited is the RATE_LIMITED refusal of a frame, with its wait.
func rateLimited(wait time.Duration, format string, args ...any) *protocol.Error {
	ms := max(1, (wait+time.Millisecond-1)/time.Millisecond)
	return withDetail(protocol.Errorf(protocol.CodeRateLimited, format, args...), "retryAfterMs", uint64(ms))
}
