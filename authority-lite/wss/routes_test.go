package wss

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Options.Routes answers under Path/ on the same listener: a request
// there is not held to the HELLO deadline (a long-poll outlives it), and
// requests per address are rate-limited.
func TestRoutesOnTheListener(t *testing.T) {
	fb := newFakeBackend(t)
	entered, release := make(chan struct{}, 4), make(chan struct{})
	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.URL.Path == "/mwp/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	})
	url, _ := startServer(t, fb, Options{HandshakeTimeout: 200 * time.Millisecond, Routes: routes, RouteBurst: 2, RouteEvery: time.Hour}, nil)
	base := strings.Replace(url, "ws://", "http://", 1)
	get := func(path string) (int, []byte) {
		resp, err := (&http.Client{Timeout: safety}).Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Connection") != "close" && !resp.Close {
			t.Errorf("%s kept its connection", path)
		}
		return resp.StatusCode, b
	}
	slow := make(chan string, 1)
	go func() {
		// Not get: a failure must reach the test, not end this goroutine.
		resp, err := (&http.Client{Timeout: safety}).Get(base + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-entered
	// A silent TCP connection accepted after the slow request: once the
	// deadline has closed it, it has passed for the slow one too.
	raw, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), Path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetReadDeadline(time.Now().Add(safety))
	if _, err := raw.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("silent connection not closed by the deadline: %v", err)
	}
	close(release)
	if b := <-slow; b != "ok /mwp/slow" {
		t.Fatalf("the slow route request answered %q", b)
	}
	if st, b := get("/fast"); st != 200 || string(b) != "ok /mwp/fast" {
		t.Fatalf("second request: %d %s", st, b)
	}
	st, b := get("/fast")
	var e protocol.Error
	if st != http.StatusTooManyRequests || json.Unmarshal(b, &e) != nil || e.Code != protocol.CodeRateLimited || e.Details["limit"] != "routeRequests" {
		t.Fatalf("third request within the burst of 2: %d %s", st, b)
	}
}

// Close ends a Routes request in flight (a long-poll) and waits for it.
func TestRoutesEndWithClose(t *testing.T) {
	fb := newFakeBackend(t)
	entered, ended := make(chan struct{}), make(chan struct{})
	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		close(entered)
		<-r.Context().Done()
	})
	url, srv := startServer(t, fb, Options{Routes: routes}, nil)
	// The client never gives up by itself: only Close can end the request.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.Replace(url, "ws://", "http://", 1)+"/poll", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case <-ended:
	case <-time.After(safety):
		t.Fatal("Close did not end the route request")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
