package client

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// BenchmarkIngest measures receiving a Group's replay through the client
// over loopback WebSocket (decode, signature check, group commit into the
// store, ACK) against a baseline measured in the same run: the same decode
// and verification and the same store batches, called directly with no
// network. client/direct is the cost of the connection itself;
// client/verify-only compares with Ed25519 verification alone of the same
// events (the floor of any ingest). Stores run without fsync, so every side
// is CPU-bound; queue's BenchmarkIngest measures the durable shape.
func BenchmarkIngest(b *testing.B) {
	const n = 2000
	log := groupLog(b, "grp-a", n)
	frames := make([][]byte, n)
	for i, raw := range log {
		frames[i] = eventFrame("s-ev", raw)
	}
	fs := newFakeServer(b, nil)
	fs.setLog("grp-a", log)
	var direct, client, verify time.Duration
	for b.Loop() {
		verify += verifyOnly(b, log)
		direct += ingestDirect(b, frames)
		client += ingestClient(b, fs, n)
	}
	b.ReportMetric(float64(client)/float64(direct), "client/direct")
	b.ReportMetric(float64(verify)/float64(client), "verify-only/client")
	b.ReportMetric(float64(client.Nanoseconds())/float64(b.N*n), "ns/event")
	b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N*n), "direct-ns/event")
}

// verifyOnly times ed25519.Verify alone over the events' signing inputs,
// computed beforehand.
func verifyOnly(b *testing.B, log [][]byte) time.Duration {
	pub := authorityKey.Public().Key
	type input struct{ msg, sig []byte }
	ins := make([]input, len(log))
	for i, raw := range log {
		v, err := protocol.Parse(raw, protocol.DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		doc := v.(map[string]any)
		msg, err := protocol.SigningInput(doc)
		if err != nil {
			b.Fatal(err)
		}
		sig, err := base64.RawURLEncoding.DecodeString(doc["signature"].(map[string]any)["value"].(string))
		if err != nil {
			b.Fatal(err)
		}
		ins[i] = input{msg, sig}
	}
	start := time.Now()
	for _, in := range ins {
		if !ed25519.Verify(pub, in.msg, in.sig) {
			b.Fatal("verify")
		}
	}
	return time.Since(start)
}

func ingestDirect(b *testing.B, frames [][]byte) time.Duration {
	store := openStore(b, b.TempDir())
	defer store.Close()
	keys := authorityKeys()
	start := time.Now()
	batch := make([]queue.Incoming, 0, 256)
	for i, f := range frames {
		in, err := decodeInbound(f, protocol.DecodeOptions{}, keys)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, in.event)
		if len(batch) == cap(batch) || i == len(frames)-1 {
			if _, err := store.Apply(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	d := time.Since(start)
	if store.Cursor("grp-a") != uint64(len(frames)) {
		b.Fatal("direct ingest incomplete")
	}
	return d
}

func ingestClient(b *testing.B, fs *fakeServer, n int) time.Duration {
	store := openStore(b, b.TempDir())
	defer store.Close()
	done := make(chan struct{})
	var once sync.Once
	c, err := New(Config{
		URL: fs.url, AllowInsecureLoopback: true, AgentID: agentID, Key: agentKey, SessionEpoch: 1,
		Store: store, Groups: []string{"grp-a"}, AuthorityKeys: authorityKeys(), PingInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnApplied: func(queue.Result) {
			if store.Cursor("grp-a") == uint64(n) {
				once.Do(func() { close(done) })
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- c.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatal("client ingest incomplete")
	}
	d := time.Since(start)
	cancel()
	<-ran
	return d
}
