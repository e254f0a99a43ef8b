package wss

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/missionweave/mwp-worker/protocol"
)

// BenchmarkStream measures replay streaming of one Group to one client and
// compares it, in the same run, with a bare coder/websocket server writing
// the same EVENT frame bytes in a loop to the same kind of client: x-raw is
// our time per event divided by the bare time per frame.
func BenchmarkStream(b *testing.B) {
	fb := newFakeBackend(b)
	key := fb.addAgent(b, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.appendEvents(b, "grp-a", 1, protocol.EvtWorkProgressed, "wi-1")
	n := b.N
	fb.mu.Lock()
	g := fb.groups["grp-a"]
	one := g.events[0]
	for i := 1; i < n; i++ {
		ev := one
		ev.Sequence = uint64(i + 1)
		g.events = append(g.events, ev) // same bytes: only throughput matters here
	}
	fb.mu.Unlock()
	frame := appendEventFrame(nil, newFrameIDs().next()+"000000", one.Raw)

	rawPer := rawStream(b, frame, n)

	url, _ := startServer(b, fb, Options{}, nil)
	c := openClient(b, url, fb, key, testNonce, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0}]}`)
	for got := 0; got < n; {
		_, msg, err := c.ws.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if bytes.HasPrefix(msg, []byte(`{"event":`)) {
			got++
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	per := float64(ours.Nanoseconds()) / float64(n)
	b.ReportMetric(per, "ns/event")
	b.ReportMetric(float64(n)/ours.Seconds(), "events/s")
	b.ReportMetric(rawPer, "raw-ns/frame")
	b.ReportMetric(per/rawPer, "x-raw")
}

// rawStream times a bare coder/websocket server writing frame n times to a
// client over 127.0.0.1 and returns nanoseconds per frame.
func rawStream(b *testing.B, frame []byte, n int) float64 {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for range n {
			if err := ws.Write(r.Context(), websocket.MessageText, frame); err != nil {
				return
			}
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
	})}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	ws, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	for range n {
		if _, _, err := ws.Read(ctx); err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}
