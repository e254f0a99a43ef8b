package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestDamagedGroupOverTheWire: a worker SUBSCRIBEs, over wss, to a Group
// whose newest stored event was damaged and to a sound one. The damaged
// Group answers ERROR STORE_DAMAGED (naming no file), the sound one
// streams its events, and subscribing again (a reconnect) gets the same
// answer from a server still up.
func TestDamagedGroupOverTheWire(t *testing.T) {
	dir := t.TempDir()
	akey := mustKey(t, protocol.ActorService, "authority-1")
	s, err := Open(Config{Dir: dir, Clock: clock.Real{}, Key: akey})
	if err != nil {
		t.Fatal(err)
	}
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := s.Principal(owner, hk)
	w := s.Principal(agent("w1"), mustKey(t, protocol.ActorAgent, "w1"))
	card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "w1", Capabilities: protocol.List[protocol.Capability]{{ID: "chat", Version: "1.0.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1}
	if err := w.Join(ctx, card); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"grp-a", "grp-b"} {
		if _, err := alice.Do(ctx, protocol.CmdMissionCreate, g, &protocol.CreateMissionPayload{MissionID: "mis-" + g, Title: g, Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Do(ctx, protocol.CmdMembershipChange, g, &protocol.ChangeMembershipPayload{Principal: agent("w1"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}); err != nil {
			t.Fatal(err)
		}
	}
	events, err := s.Events("grp-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantB, _ := s.Events("grp-b", 0, 0)
	session := s.SessionEpoch("w1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipInFile(t, filepath.Join(dir, LogFile), events[len(events)-1].Raw)

	s, err = Open(Config{Dir: dir, Clock: clock.Real{}, Key: akey})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cert, fp, err := wss.LoadOrCreateCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ln, err := wss.Listen(sctx, "127.0.0.1:0", wss.ListenOptions{Certificate: &cert})
	if err != nil {
		t.Fatal(err)
	}
	go wss.NewServer(s, wss.Options{}).Serve(sctx, ln)
	url := "wss://" + ln.Addr().String() + wss.Path
	for attempt := range 2 {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ws := dialHello(t, rctx, url, fp, w, session)
		sub := fmt.Appendf(nil, `{"type":"SUBSCRIBE","frameId":"s%d","groups":[{"groupId":"grp-a","afterSequence":0},{"groupId":"grp-b","afterSequence":0}]}`, attempt)
		if err := ws.Write(rctx, websocket.MessageText, sub); err != nil {
			t.Fatal(err)
		}
		var gotErr *protocol.Error
		gotB := 0
		for gotErr == nil || gotB < len(wantB) {
			_, msg, err := ws.Read(rctx)
			if err != nil {
				t.Fatalf("attempt %d: read: %v (error %v, %d of %d grp-b events)", attempt, err, gotErr, gotB, len(wantB))
			}
			var f struct {
				Type  protocol.FrameType `json:"type"`
				Error *protocol.Error    `json:"error"`
				Event *protocol.Event    `json:"event"`
			}
			if err := json.Unmarshal(msg, &f); err != nil {
				t.Fatal(err)
			}
			switch {
			case f.Type == protocol.FrameError:
				gotErr = f.Error
				if f.Error.Details["reason"] != ReasonStoreDamaged || f.Error.Details["groupId"] != "grp-a" || f.Error.Details["files"] != nil {
					t.Fatalf("error frame %s", msg)
				}
			case f.Type == protocol.FrameEvent && f.Event.GroupID == "grp-b":
				gotB++
			case f.Type == protocol.FrameEvent:
				t.Fatalf("a damaged Group's event was served: %s", msg)
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
		cancel()
	}
}

func dialHello(t *testing.T, ctx context.Context, url, fp string, a *Principal, session uint64) *websocket.Conn {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: wss.ClientTLSConfig(fp)}
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, Subprotocols: []string{wss.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	proof := protocol.HelloProof{AgentID: a.Actor.ID, SessionEpoch: session, Nonce: hex.EncodeToString(nonce[:]), IssuedAt: protocol.NewTime(time.Now())}
	proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: a.Key.KeyID, CreatedAt: proof.IssuedAt}
	signed, err := protocol.SignedValue(proof, a.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(signed, &proof); err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: "h1", ProtocolVersions: []string{protocol.Version}, AgentID: a.Actor.ID, SessionEpoch: session, Proof: &proof})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil {
		t.Fatal(err)
	} else if ft, _ := frameType(msg); ft != protocol.FrameHello {
		t.Fatalf("hello answered with %s", msg)
	}
	return ws
}

// flipInFile changes one digit of raw's occurredAt where it is stored.
func flipInFile(t *testing.T, path string, raw []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := damagedLog{events: map[string][][]byte{"grp-a": {raw}}}
	if err := os.WriteFile(path, flipEvent(1).do(t, b, data), 0o600); err != nil {
		t.Fatal(err)
	}
}
