package wss

import (
	"sync"
	"time"
)

// liveness decides, from the Backend's clock, when the server should PING a
// silent client and when it should give up on it. It is pure apart from
// its mutex: the reader reports traffic, a ticker asks for a verdict.
type liveness struct {
	mu        sync.Mutex
	helloBy   time.Time // deadline for HELLO; zero once the session is open
	idle      time.Duration
	pingEvery time.Duration
	lastSeen  time.Time
	lastPing  time.Time
}

type verdict int

const (
	stayQuiet verdict = iota
	sendPing
	expireNoHello
	expireIdle
)

func newLiveness(now time.Time, o Options) *liveness {
	return &liveness{helloBy: now.Add(o.HandshakeTimeout), idle: o.IdleTimeout, pingEvery: o.PingInterval, lastSeen: now, lastPing: now}
}

// seen records a message from the client.
func (l *liveness) seen(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.After(l.lastSeen) {
		l.lastSeen = now
	}
}

// opened records a successful HELLO: from now on only idleness counts.
func (l *liveness) opened() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.helloBy = time.Time{}
}

// tick returns what to do at now. A PING is due when the client has been
// silent for pingEvery and no PING went out in that time either; the
// connection expires when HELLO is late or the client is silent for idle.
func (l *liveness) tick(now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.helloBy.IsZero() && !now.Before(l.helloBy):
		return expireNoHello
	case now.Sub(l.lastSeen) >= l.idle:
		return expireIdle
	case l.helloBy.IsZero() && now.Sub(l.lastSeen) >= l.pingEvery && now.Sub(l.lastPing) >= l.pingEvery:
		l.lastPing = now
		return sendPing
	}
	return stayQuiet
}
