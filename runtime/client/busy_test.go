package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// An authority at its connection cap answers 503 with Retry-After: the
// client waits that long (on its clock) and a jittered part of it more
// (half of it more with a draw of 0.5: every client refused at once was
// told the same time) before dialing again, instead of its much shorter
// backoff, then connects.
func TestDialHonoursRetryAfter(t *testing.T) {
	noLeaks(t)
	fc := clock.NewFake(time.Now()) // HELLO proofs are checked against the real clock
	b := newWSSBackend()
	b.logs["grp-a"] = nil
	srv := wss.NewServer(b, wss.Options{})
	var (
		mu    sync.Mutex
		times []time.Time // fake time of every dial
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, fc.Now())
		first := len(times) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	store := openStore(t, t.TempDir())
	defer store.Close()
	st := &states{sig: newSignal()}
	c, err := New(Config{
		URL: "ws://" + strings.TrimPrefix(ts.URL, "http://") + "/mwp", AllowInsecureLoopback: true,
		AgentID: agentID, Key: agentKey, SessionEpoch: 1, Store: store, AuthorityKeys: authorityKeys(), Clock: fc,
		Backoff: Backoff{Base: time.Millisecond, Cap: 10 * time.Millisecond}, OnState: st.on, Logger: quietLogger(t),
		Rand: func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	dials := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(times)
	}
	// Move the clock only until the second dial: then the HELLO's own
	// timeout, on the same clock, must not expire while it runs.
	deadline := time.Now().Add(20 * time.Second)
	for dials() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("never dialed again")
		}
		if dials() == 1 {
			fc.Advance(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, st.sig, "connected", func() bool { return st.count(StateConnected) == 1 })
	if ch, _ := st.last(StateDisconnected); !errors.As(ch.Err, new(*busyError)) {
		t.Fatalf("the refusal was reported as %v", ch.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 || times[1].Sub(times[0]) < 7*time.Second+3500*time.Millisecond {
		t.Fatalf("dials at %v: the second came %v after the 503, want at least 10.5s", times, times[len(times)-1].Sub(times[0]))
	}
}

// A HELLO refused with RATE_LIMITED (too many HELLOs from this address) is
// not fatal: it is a disconnect that waits the retryAfterMs it names.
func TestHelloRateLimitedWaitsRetryAfter(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.helloErr = protocol.WithDetails(protocol.Errorf(protocol.CodeRateLimited, "too many HELLOs"), "retryAfterMs", 7000)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	waitFor(t, r.sig, "the refused HELLO reported", func() bool { return r.st.count(StateDisconnected) >= 1 })
	ch, _ := r.st.last(StateDisconnected)
	var busy *busyError
	if !errors.As(ch.Err, &busy) || busy.retryAfter != 7*time.Second || protocol.CodeOf(ch.Err) != protocol.CodeRateLimited {
		t.Fatalf("disconnect reported as %v", ch.Err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
