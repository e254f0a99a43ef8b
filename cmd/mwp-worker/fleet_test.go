package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// fleetAgents is how many agents TestAuthorityServeFleetReconnects runs:
// more than the per-address connection cap (64) and the HELLO burst (10)
// of the defaults, few enough for a loaded CI machine under -race.
// MWP_FLEET_AGENTS=500 MWP_FLEET_TLS=1 runs the figure docs/operations.md
// reports (TLS as in production; the default is plain ws, cheaper in CI).
func fleetAgents(t *testing.T) int {
	n := 100
	if v := os.Getenv("MWP_FLEET_AGENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("MWP_FLEET_AGENTS=%q: want a positive number", v)
		}
	}
	return n
}

// A fleet behind one address (every agent dials from 127.0.0.1) against
// `authority serve` with its default limits: every agent gets a session,
// the authority restarts on the same port, and every agent gets a session
// again, none of its HELLOs refused for the address's rate. It logs how
// long after the restarted authority listened the agents had their
// sessions (p50, p100); it asserts counts only.
func TestAuthorityServeFleetReconnects(t *testing.T) {
	n := fleetAgents(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "authority")
	args := []string{"mwp-worker", "authority", "serve", "--data", data, "--log-level", "error"}
	tls := os.Getenv("MWP_FLEET_TLS") == "1"
	if !tls {
		args = append(args, "--insecure-loopback")
	}
	var enroll []string
	keys := make([]protocol.PrivateKey, n)
	for i := range n {
		path, key := agentEnrollment(t, dir, fleetAgentID(i))
		keys[i] = key
		enroll = append(enroll, "--enroll", path)
	}

	first := startAuthority(t, append(slices.Concat(args, enroll), "--listen", "127.0.0.1:0"))
	f := &fleet{n: n, connectedAt: make([]time.Time, n)}
	apub, err := protocol.LoadPublicKey(filepath.Join(data, "authority.pub"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var agents sync.WaitGroup
	defer func() {
		cancel()
		agents.Wait()
	}()
	for i := range n {
		store, err := queue.Open(filepath.Join(dir, "agents", fleetAgentID(i)), queue.Options{NoSocket: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		c, err := client.New(client.Config{
			URL: first.url, AllowInsecureLoopback: !tls, Trust: client.Trust{Pin: first.fingerprint}, AgentID: fleetAgentID(i), Key: keys[i],
			Store: store, AuthorityKeys: protocol.NewKeySet(apub), OnState: func(ch client.StateChange) { f.on(i, ch) },
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		agents.Go(func() { _ = c.Run(ctx) })
	}
	f.await(t, "every agent's first session", func() bool { return f.sessions() == n })

	first.stop(t)
	f.restart()
	second := startAuthority(t, append(slices.Clone(args), "--listen", first.addr))
	defer second.stop(t)
	up := time.Now()
	f.await(t, "every agent's session after the restart", func() bool { return f.sessions() == n })
	d := f.sinceRestart(up)
	t.Logf("%d agents behind 127.0.0.1: sessions again after the restart p50 %v, p100 %v (from the authority listening again)",
		n, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	if refused := f.rateLimited(); refused != 0 {
		t.Fatalf("%d HELLOs after the restart were refused RATE_LIMITED; a HELLO that succeeds must not use up its address's budget", refused)
	}
}

func fleetAgentID(i int) string { return fmt.Sprintf("fleet-%04d", i) }

// agentEnrollment writes agent id's signed agent_card_register to dir,
// for `authority serve --enroll`, and returns its path and the key.
func agentEnrollment(t *testing.T, dir, id string) (string, protocol.PrivateKey) {
	t.Helper()
	key, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	card, err := protocol.SignedCard(protocol.AgentCard{AgentID: id, AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id,
		Keys: protocol.List[protocol.PublicKey]{key.Public().Encode()}, Capabilities: protocol.List[protocol.Capability]{{ID: "noop", Version: "1.0.0"}},
		Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1, IssuedAt: protocol.NewTime(time.Now())}, key)
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := protocol.BuildCommand(protocol.Actor{Kind: protocol.ActorAgent, ID: id}, key, protocol.CmdAgentCardRegister, protocol.Envelope{},
		&protocol.RegisterAgentCardPayload{AgentCard: card}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, id+"-enroll.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// fleet counts the agents' sessions.
type fleet struct {
	n           int
	mu          sync.Mutex
	connectedAt []time.Time // each agent's latest session, zero when none since restart
	limited     int         // disconnects for a HELLO refused RATE_LIMITED, since restart
}

func (f *fleet) on(i int, ch client.StateChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ch.State == client.StateConnected && f.connectedAt[i].IsZero():
		f.connectedAt[i] = time.Now()
	case ch.State == client.StateDisconnected && protocol.CodeOf(ch.Err) == protocol.CodeRateLimited:
		f.limited++
	}

}

func (f *fleet) sessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, at := range f.connectedAt {
		if !at.IsZero() {
			n++
		}
	}
	return n
}

// restart forgets every session: the authority that held them stopped.
func (f *fleet) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.connectedAt)
	f.limited = 0
}

func (f *fleet) rateLimited() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limited
}

// sinceRestart is, sorted, how long after up each agent had its session.
func (f *fleet) sinceRestart(up time.Time) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d []time.Duration
	for _, at := range f.connectedAt {
		d = append(d, max(0, at.Sub(up)))
	}
	slices.Sort(d)
	return d
}

// await polls cond; the bound is a hang guard, far above what the
// defaults need, not a timing assertion.
func (f *fleet) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s: %d of %d agents have one", what, f.sessions(), f.n)
		}
	}
}

// servedAuthority is `authority serve` run in this process.
type servedAuthority struct {
	url, addr   string
	fingerprint string // "" when plain ws
	cancel      context.CancelFunc
	done        chan int
	errOut      *lockedBuffer
}

var anyListening = regexp.MustCompile(`listening on (wss?://(127\.0\.0\.1:\d+)/mwp)`)

func startAuthority(t *testing.T, args []string) *servedAuthority {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &servedAuthority{cancel: cancel, done: make(chan int, 1), errOut: &lockedBuffer{}}
	var out lockedBuffer
	go func() { a.done <- run(ctx, args, &out, a.errOut) }()
	for deadline := time.Now().Add(time.Minute); a.addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := anyListening.FindStringSubmatch(out.String()); m != nil {
			a.url, a.addr = m[1], m[2]
			if fp := fingerprintLine.FindStringSubmatch(out.String()); fp != nil {
				a.fingerprint = fp[1]
			} else if m[1][:3] == "wss" {
				a.addr = "" // the fingerprint line follows
			}
		}
		select {
		case code := <-a.done:
			t.Fatalf("authority serve exited %d: %s", code, a.errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("authority serve printed no URL: %s", a.errOut.String())
		}
	}
	return a
}

func (a *servedAuthority) stop(t *testing.T) {
	t.Helper()
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	if code := <-a.done; code != 0 {
		t.Errorf("authority serve exited %d: %s", code, a.errOut.String())
	}
}

// --hello-rate reaches the server: with 1/1h a failed HELLO takes the
// address's one token and the next HELLO is refused RATE_LIMITED.
func TestAuthorityServeHelloRate(t *testing.T) {
	a := startAuthority(t, []string{"mwp-worker", "authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback", "--hello-rate", "1/1h"})
	defer a.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, a.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var codes []protocol.Code
	for i := range 2 {
		if err := ws.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"type":"HELLO","frameId":"h%d"}`, i))); err != nil {
			t.Fatal(err)
		}
		_, raw, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ Error protocol.Error }
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		codes = append(codes, f.Error.Code)
	}
	if codes[0] == protocol.CodeRateLimited || codes[1] != protocol.CodeRateLimited {
		t.Fatalf("two bad HELLOs with --hello-rate 1/1h answered %v; want a refusal, then RATE_LIMITED", codes)
	}
}
