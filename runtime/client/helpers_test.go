package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// t0 is an arbitrary fixed instant: event times are data, not the clock.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const agentID = "worker-1"

func seededKey(keyID string, seed byte) protocol.PrivateKey {
	s := bytes.Repeat([]byte{seed}, ed25519.SeedSize)
	return protocol.PrivateKey{KeyID: keyID, Key: ed25519.NewKeyFromSeed(s)}
}

var (
	agentKey     = seededKey("agent:worker-1#k1", 1)
	authorityKey = seededKey("authority-1#k1", 2)
	otherKey     = seededKey("authority-1#k1", 3) // same id, wrong key
)

func authorityKeys() protocol.KeySet { return protocol.NewKeySet(authorityKey.Public()) }

// groupLog builds a Group's signed event log as an authority would.
func groupLog(t testing.TB, group string, n int) [][]byte {
	t.Helper()
	out := make([][]byte, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, signedEvent(t, group, uint64(i), authorityKey))
	}
	return out
}

// signedEvent returns event seq of group: the mission first, then WorkItems
// with contracts, then messages, so the projection has work to do.
func signedEvent(t testing.TB, group string, seq uint64, key protocol.PrivateKey) []byte {
	t.Helper()
	mis := "mis-" + group
	var typ protocol.EventType
	var agg protocol.Aggregate
	var payload any
	switch {
	case seq == 1:
		typ, agg = protocol.EvtMissionCreated, protocol.Aggregate{Kind: protocol.AggregateMission, ID: mis}
		payload = map[string]any{"missionId": mis, "state": "active", "mission": protocol.Mission{MissionID: mis, GroupID: group,
			Title: "t", Objective: "o", State: protocol.MissionActive, Owner: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"},
			PriorityClass: protocol.PriorityHigh, CreatedAt: protocol.NewTime(t0), Revision: 1}}
	case seq%3 == 0:
		wi := fmt.Sprintf("wi-%d", seq)
		typ, agg = protocol.EvtWorkAuthorized, protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: wi}
		payload = map[string]any{"workItemId": wi, "state": "open", "missionId": mis, "contract": testContract(), "contractRevision": 1}
	default:
		id := fmt.Sprintf("msg-%d", seq)
		typ, agg = protocol.EvtMessagePosted, protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id}
		payload = map[string]any{"messageId": id, "author": protocol.Actor{Kind: protocol.ActorAgent, ID: "coord-1"}, "text": "hello", "state": "posted"}
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	rev := uint64(1)
	ev := protocol.Event{
		EventID: fmt.Sprintf("evt-%s-%d", group, seq), GroupID: group, Sequence: &seq,
		Aggregate: &agg, Revision: &rev, Type: typ,
		Actor:       protocol.Actor{Kind: protocol.ActorAgent, ID: "coord-1"},
		CausationID: fmt.Sprintf("act-%s-%d", group, seq), CorrelationID: mis,
		OccurredAt: protocol.NewTime(t0.Add(time.Duration(seq) * time.Second)), AcceptedBy: "authority-1",
		Payload: p,
	}
	raw, err := protocol.SignedEvent(&ev, key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func testContract() protocol.WorkContract {
	return protocol.WorkContract{
		ContractID: "wc-1", Revision: 1, Goal: "implement the thing",
		RequiredOutputs:      []protocol.OutputSpec{{Name: "patch", MediaType: "text/x-diff"}},
		AcceptanceCriteria:   []protocol.AcceptanceCriterion{{ID: "ac-1", Description: "tests pass", EvidenceRequired: []string{"test-report"}}},
		Inputs:               []protocol.InputRef{},
		AllowedTools:         []string{"git"},
		AllowedData:          []string{"repo:a"},
		AllowedOperations:    []string{"read"},
		ResourceLimits:       protocol.ResourceLimits{CPU: protocol.Float64(1)},
		RequiredCapabilities: []protocol.Capability{{ID: "code.implement", Version: "1.x"}},
		Deadline:             protocol.NewTime(t0.Add(24 * time.Hour)),
		Urgency:              protocol.UrgencyNormal,
		BusinessImpact:       protocol.ImpactMedium,
		Budgets:              protocol.Budgets{ToolCalls: protocol.Uint64(100)},
		RetryPolicy:          protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2}, AttemptTimeoutMs: 600000, CostLimit: 5},
		Risk:                 protocol.Risk{Class: protocol.RiskLow},
	}
}

// signedCommand returns a signed message.post of group with actionId act.
func signedCommand(t testing.TB, act, group string) []byte {
	t.Helper()
	cmd := protocol.Command{
		ActionID: act, ProtocolVersion: protocol.Version, Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: agentID},
		Type: protocol.CmdMessagePost, GroupID: group, SessionEpoch: protocol.Uint64(1), MembershipEpoch: protocol.Uint64(1),
		CorrelationID: "mis-" + group, IssuedAt: protocol.NewTime(t0),
		Payload: json.RawMessage(`{"text":"hi","conversationId":"c-1"}`),
	}
	raw, err := protocol.SignedCommand(&cmd, agentKey)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func openStore(t testing.TB, dir string) *queue.Store {
	t.Helper()
	s, err := queue.Open(dir, queue.Options{NoSync: true, NoSocket: true, NoPopulate: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// referenceStore applies each log in order, one event at a time: the store
// a perfect network would produce.
func referenceStore(t testing.TB, logs map[string][][]byte) *queue.Store {
	t.Helper()
	s := openStore(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	for _, log := range logs {
		for _, raw := range log {
			in, err := queue.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Apply([]queue.Incoming{in}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// sameStore fails unless got holds exactly what want holds for groups:
// cursor, every inbox event's bytes, the WorkItem views and the Mission.
func sameStore(t testing.TB, got, want *queue.Store, groups ...string) {
	t.Helper()
	for _, g := range groups {
		if gc, wc := got.Cursor(g), want.Cursor(g); gc != wc {
			t.Fatalf("group %s: cursor %d, want %d", g, gc, wc)
		}
		for seq := uint64(1); seq <= want.Cursor(g); seq++ {
			a, err := got.Event(g, seq)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := want.Event(g, seq)
			if !bytes.Equal(a, b) {
				t.Fatalf("group %s event %d differs:\n got %s\nwant %s", g, seq, a, b)
			}
		}
		if a, b := got.Items(g), want.Items(g); !reflect.DeepEqual(a, b) {
			t.Fatalf("group %s items differ:\n got %+v\nwant %+v", g, a, b)
		}
		a, _ := got.Mission(g)
		b, _ := want.Mission(g)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("group %s mission differs: got %+v want %+v", g, a, b)
		}
	}
}

// noLeaks fails the test if it ends with more goroutines than it began
// with. Call it first so its cleanup runs last.
func noLeaks(t *testing.T) {
	before := goruntime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := goruntime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:goruntime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
		}
	})
}

// signal is a level-triggered "something changed" notification.
type signal chan struct{}

func newSignal() signal { return make(signal, 1) }

func (s signal) kick() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds, re-checking whenever sig fires (and now
// and then, for changes nothing signals); it gives up after a generous
// bound: a failing test, not a timing assertion.
func waitFor(t testing.TB, sig signal, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-sig:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// states records OnState calls.
type states struct {
	mu  sync.Mutex
	all []StateChange
	sig signal
}

func (s *states) on(ch StateChange) {
	s.mu.Lock()
	s.all = append(s.all, ch)
	s.mu.Unlock()
	s.sig.kick()
}

func (s *states) count(st State) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.all {
		if c.State == st {
			n++
		}
	}
	return n
}

func (s *states) last(st State) (StateChange, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.all) - 1; i >= 0; i-- {
		if s.all[i].State == st {
			return s.all[i], true
		}
	}
	return StateChange{}, false
}

func quietLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(&tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tWriter struct{ t testing.TB }

func (w *tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// running is a started client.
type running struct {
	c      *Client
	st     *states
	sig    signal // kicked on every state change and store transaction
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, once done is closed
}

// stop shuts the client down and returns Run's result.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// connected waits until the client is connected.
func (r *running) connected(t testing.TB) {
	t.Helper()
	waitFor(t, r.sig, "connected", func() bool { return r.c.State() == StateConnected })
}

// wait returns Run's result once it returns by itself.
func (r *running) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// startClient runs a client with test defaults: plain ws to the fake
// server, the authority's key, fast backoff, pings off unless cfg sets them.
// before, if given, runs on the Client before Run starts.
func startClient(t *testing.T, fs *fakeServer, cfg Config, before ...func(*Client)) *running {
	t.Helper()
	sig := newSignal()
	st := &states{sig: sig}
	cfg.URL = fs.url
	cfg.AllowInsecureLoopback = true
	cfg.AgentID = agentID
	cfg.Key = agentKey
	if cfg.SessionEpoch == 0 {
		cfg.SessionEpoch = 1
	}
	if cfg.AuthorityKeys == nil {
		cfg.AuthorityKeys = authorityKeys()
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = Backoff{Base: time.Millisecond, Cap: 20 * time.Millisecond, Jitter: JitterFull}
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = -1
	}
	if cfg.GapTimeout == 0 {
		cfg.GapTimeout = 50 * time.Millisecond
	}
	cfg.OnState = st.on
	user := cfg.OnApplied
	cfg.OnApplied = func(r queue.Result) {
		if user != nil {
			user(r)
		}
		sig.kick()
	}
	cfg.Logger = quietLogger(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, st: st, sig: sig, cancel: cancel, done: make(chan struct{})}
	fs.watch(sig)
	go func() {
		r.err = c.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}
