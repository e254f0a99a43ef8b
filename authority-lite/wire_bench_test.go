package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// BenchmarkWireLatency measures command latency over loopback wss (TLS 1.3,
// the real server, the real Service with fsync) with 8 concurrent agent
// clients, each sending message.post and waiting for its ACK receipt.
// It reports p50 and p99 and, measured in the same run, the ratio of the
// wire p50 to an in-process Submit p50 of the same commands.
func BenchmarkWireLatency(b *testing.B) {
	const clients = 8
	dir := b.TempDir()
	s, err := Open(Config{Dir: dir, Clock: clock.Real{}, Key: mustKey(b, protocol.ActorService, "authority-1"), RateBurst: 1 << 30, RateEvery: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	hk := mustKey(b, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	alice := s.Principal(owner, hk)
	if _, err := alice.Do(ctx, protocol.CmdMissionCreate, "grp-a", &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
		b.Fatal(err)
	}
	agents := make([]*Principal, clients)
	for i := range agents {
		id := fmt.Sprintf("c%d", i)
		agents[i] = s.Principal(agent(id), mustKey(b, protocol.ActorAgent, id))
		card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id, Capabilities: protocol.List[protocol.Capability]{{ID: "chat", Version: "1.0.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1}
		if err := agents[i].Join(ctx, card); err != nil {
			b.Fatal(err)
		}
		if _, err := alice.Do(ctx, protocol.CmdMembershipChange, "grp-a", &protocol.ChangeMembershipPayload{Principal: agent(id), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}); err != nil {
			b.Fatal(err)
		}
	}
	cert, fp, err := wss.LoadOrCreateCert(dir)
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ln, err := wss.Listen(sctx, "127.0.0.1:0", wss.ListenOptions{Certificate: &cert})
	if err != nil {
		b.Fatal(err)
	}
	srv := wss.NewServer(s, wss.Options{})
	go srv.Serve(sctx, ln)
	url := "wss://" + ln.Addr().String() + wss.Path

	n := max(b.N, clients)
	per := n / clients
	cmds := make([][][]byte, clients)
	for i, a := range agents {
		for j := range per {
			_, raw, err := a.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: fmt.Sprintf("m-%d-%d", i, j), ConversationID: "c", Text: "status update"})
			if err != nil {
				b.Fatal(err)
			}
			cmds[i] = append(cmds[i], raw)
		}
	}
	b.ResetTimer()
	var mu sync.Mutex
	var wire []time.Duration
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, err := wireClient(ctx, url, fp, a, s.SessionEpoch(a.Actor.ID), cmds[i])
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			wire = append(wire, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()

	// Baseline, same run: in-process Submit of equivalent fresh commands.
	var local []time.Duration
	var lmu sync.Mutex
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range per {
				_, raw, _ := a.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: fmt.Sprintf("l-%d-%d", i, j), ConversationID: "c", Text: "status update"})
				t0 := time.Now()
				if _, err := s.Submit(ctx, "", raw); err != nil {
					b.Error(err)
				}
				lmu.Lock()
				local = append(local, time.Since(t0))
				lmu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wire) == 0 || len(local) == 0 {
		return
	}
	p50, p99 := percentile(wire, 50), percentile(wire, 99)
	b.ReportMetric(float64(p50.Microseconds()), "p50_us")
	b.ReportMetric(float64(p99.Microseconds()), "p99_us")
	b.ReportMetric(float64(p50)/float64(percentile(local, 50)), "x_inprocess_p50")
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// wireClient says HELLO as a's agent and sends cmds one at a time, timing
// each COMMAND until its ACK.
func wireClient(ctx context.Context, url, fp string, a *Principal, session uint64, cmds [][]byte) ([]time.Duration, error) {
	tr := &http.Transport{TLSClientConfig: wss.ClientTLSConfig(fp)}
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, Subprotocols: []string{wss.Subprotocol}})
	if err != nil {
		return nil, err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	proof := protocol.HelloProof{AgentID: a.Actor.ID, SessionEpoch: session, Nonce: hex.EncodeToString(nonce[:]), IssuedAt: protocol.NewTime(time.Now())}
	proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: a.Key.KeyID, CreatedAt: proof.IssuedAt}
	signed, err := protocol.SignedValue(proof, a.Key)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(signed, &proof); err != nil {
		return nil, err
	}
	hello, _ := json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: "h1", ProtocolVersions: []string{protocol.Version}, AgentID: a.Actor.ID, SessionEpoch: session, Proof: &proof})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		return nil, err
	}
	if _, msg, err := ws.Read(ctx); err != nil || !json.Valid(msg) {
		return nil, fmt.Errorf("hello: %v", err)
	} else if t, _ := frameType(msg); t != protocol.FrameHello {
		return nil, fmt.Errorf("hello answered with %s", msg)
	}
	out := make([]time.Duration, 0, len(cmds))
	for i, raw := range cmds {
		frame := fmt.Appendf(nil, `{"type":"COMMAND","frameId":"f%d","command":%s}`, i, raw)
		t0 := time.Now()
		if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
			return nil, err
		}
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				return nil, err
			}
			t, _ := frameType(msg)
			if t == protocol.FrameAck {
				break
			}
			if t == protocol.FrameError {
				return nil, fmt.Errorf("command refused: %s", msg)
			}
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func frameType(msg []byte) (protocol.FrameType, error) {
	var f struct {
		Type protocol.FrameType `json:"type"`
	}
	err := json.Unmarshal(msg, &f)
	return f.Type, err
}
