package remote_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
)

// proxyOn forwards connections on addr to target until the test ends.
func proxyOn(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s again: %v", addr, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			})
		}
	})
}

// With Config.Patience, a request that finds the authority unreachable
// (connection refused) waits for it with Retry's back-off and succeeds
// once it is back; without, it fails at once. Dial's first request and a
// command alike: `mission` and `coordinator run` use it.
func TestPatienceWaitsOutAnOutage(t *testing.T) {
	k := newKit(t)
	target, pin := k.a.Endpoint()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	// An address where nothing listens yet (the authority is down).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	down := "wss://" + addr + tu.Path

	cfg := remote.Config{URL: down, Trust: remote.Trust{Pin: pin}, Actor: alice, Key: k.alice, AuthorityKeys: k.a.Keys()}
	if _, err := remote.Dial(context.Background(), cfg); err == nil || !remote.Transient(err) {
		t.Fatalf("Dial without patience = %v, want a transient failure at once", err)
	}

	waits := make(chan error, 100)
	cfg.Patience = remote.Patience{Grace: time.Minute, First: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	cfg.Waiting = func(_ int, _ time.Duration, err error) { waits <- err }
	reached := make(chan int, 100)
	cfg.Reached = func(tries int) { reached <- tries }
	dialed := make(chan error, 1)
	var a *remote.Authority
	go func() {
		var err error
		a, err = remote.Dial(context.Background(), cfg)
		dialed <- err
	}()
	select {
	case err := <-waits:
		if !remote.Transient(err) {
			t.Fatalf("waited on %v", err)
		}
	case err := <-dialed:
		t.Fatalf("Dial with patience returned before the authority was back: %v", err)
	}
	proxyOn(t, addr, tu.Host) // the authority is back
	if err := <-dialed; err != nil {
		t.Fatalf("Dial with patience = %v", err)
	}
	// Reached says that the request that waited got its answer, and the
	// tries it took.
	if n := <-reached; n < 2 || n != len(waits)+2 {
		t.Fatalf("reached after %d tries, with %d waits", n, len(waits)+1)
	}
	for len(reached) > 0 { // Dial's other requests
		if n := <-reached; n != 1 {
			t.Fatalf("a request that did not wait reached after %d tries", n)
		}
	}
	_, raw, err := protocol.BuildCommand(alice, k.alice, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp:o.1"},
		&protocol.CreateMissionPayload{MissionID: "mis:o.1", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := a.Submit(context.Background(), raw); err != nil || len(rc.Events) == 0 {
		t.Fatalf("Submit = %+v, %v", rc, err)
	}
	if n := <-reached; n != 1 || len(reached) != 0 {
		t.Fatalf("a command answered at once: reached after %d tries, %d more", n, len(reached))
	}
}
