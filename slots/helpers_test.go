package slots

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// fakeHost records every call; outcomes arrive on a channel.
type fakeHost struct {
	mu        sync.Mutex
	calls     []string
	progress  []protocol.Progress
	cps       []checkpoint.Checkpoint
	artifacts map[string][]byte
	published []Artifact
	remaining protocol.Budgets
	allow     func(Risk) error
	// onProgress and onCheckpoint, when set, run inside the call.
	onProgress   func(Slot, protocol.Progress)
	onCheckpoint func(Slot, checkpoint.Checkpoint)
	readArtifact func(digest string) ([]byte, error)
	outcomes     chan Outcome
}

func newFakeHost() *fakeHost {
	return &fakeHost{artifacts: map[string][]byte{}, outcomes: make(chan Outcome, 16)}
}

func (h *fakeHost) record(s Slot, what string) {
	h.mu.Lock()
	h.calls = append(h.calls, fmt.Sprintf("%s/%s %s", s.GroupID, s.WorkItemID, what))
	h.mu.Unlock()
}

func (h *fakeHost) Progress(_ context.Context, s Slot, p protocol.Progress) error {
	h.record(s, "progress "+p.Phase)
	h.mu.Lock()
	h.progress = append(h.progress, p)
	f := h.onProgress
	h.mu.Unlock()
	if f != nil {
		f(s, p)
	}
	return nil
}

func (h *fakeHost) Checkpointed(_ context.Context, s Slot, c checkpoint.Checkpoint) error {
	h.record(s, "checkpointed "+c.Phase)
	h.mu.Lock()
	h.cps = append(h.cps, c)
	f := h.onCheckpoint
	h.mu.Unlock()
	if f != nil {
		f(s, c)
	}
	return nil
}

func (h *fakeHost) PublishArtifact(_ context.Context, s Slot, a Artifact) (string, error) {
	d := protocol.Digest(a.Data)
	h.record(s, "artifact "+a.MediaType)
	h.mu.Lock()
	h.artifacts[d] = a.Data
	h.published = append(h.published, a)
	h.mu.Unlock()
	return d, nil
}

// ReadArtifact answers from the artifacts map, or through readArtifact
// when set.
func (h *fakeHost) ReadArtifact(_ context.Context, s Slot, digest string) ([]byte, error) {
	h.record(s, "read "+digest)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.readArtifact != nil {
		return h.readArtifact(digest)
	}
	data, ok := h.artifacts[digest]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "artifact %s is not in the store", digest)
	}
	return data, nil
}

func (h *fakeHost) Allow(_ context.Context, s Slot, r Risk) error {
	h.record(s, "allow "+string(r.Class))
	h.mu.Lock()
	f := h.allow
	h.mu.Unlock()
	if f != nil {
		return f(r)
	}
	return nil
}

func (h *fakeHost) Remaining(context.Context, Slot) (protocol.Budgets, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.remaining, nil
}

func (h *fakeHost) Finish(o Outcome) { h.outcomes <- o }

func (h *fakeHost) callLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// wait returns the next outcome; the bound only catches a hung test.
func (h *fakeHost) wait(t *testing.T) Outcome {
	t.Helper()
	select {
	case o := <-h.outcomes:
		return o
	case <-time.After(20 * time.Second):
		t.Fatal("no outcome")
		return Outcome{}
	}
}

// noOutcome checks that no outcome is pending.
func (h *fakeHost) noOutcome(t *testing.T) {
	t.Helper()
	select {
	case o := <-h.outcomes:
		t.Fatalf("unexpected outcome %v: %s", o.Kind, o.Reason)
	default:
	}
}

type env struct {
	pool  *Pool
	host  *fakeHost
	clock *clock.Fake
	store *checkpoint.Store
}

func newEnv(t testing.TB, slots int, hs ...Handler) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "worker.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(db, filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{host: newFakeHost(), clock: clock.NewFake(t0), store: store}
	e.pool, err = New(Config{
		AgentID: "worker-1", Slots: slots, Handlers: hs, Host: e.host, Checkpoints: store,
		Clock: e.clock, WorkRoot: t.TempDir(), PreemptTimeout: 10 * time.Second, TickInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.pool.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		db.Close()
	})
	return e
}

// advance moves the fake clock and runs supervision.
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	e.pool.Tick()
}

// killed reports whether supervision has cancelled the run in slot i.
func (e *env) killed(i int) bool {
	e.pool.mu.Lock()
	r := e.pool.runs[i]
	e.pool.mu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killed != nil
}

func u64(v uint64) *uint64                 { return &v }
func f64(v float64) *float64               { return &v }
func caps(id string) []protocol.Capability { return []protocol.Capability{{ID: id, Version: "1.x"}} }

func contract(capID string) protocol.WorkContract {
	return protocol.WorkContract{
		ContractID: "wc-1", Revision: 1, Goal: "do " + capID,
		AllowedTools: []string{"git", "http"}, AllowedOperations: []string{"read", "write"},
		RequiredCapabilities: caps(capID),
		Deadline:             protocol.NewTime(t0.Add(24 * time.Hour)),
		Urgency:              protocol.UrgencyNormal, BusinessImpact: protocol.ImpactMedium,
		Budgets:     protocol.Budgets{ToolCalls: u64(100)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 1, Backoff: protocol.Backoff{InitialMs: 1000, MaxMs: 8000, Multiplier: 2}},
		Risk:        protocol.Risk{Class: protocol.RiskLow},
	}
}

func assignment(group, item, lease, capID string) Assignment {
	return Assignment{
		GroupID: group, MissionID: "mis-" + group, WorkItemID: item, OwnershipEpoch: 1,
		LeaseID: lease, LeaseExpiresAt: t0.Add(time.Hour), Contract: contract(capID),
		Context:     contextFor(group, "mis-"+group, item),
		CitedEvents: fakeEvents(group, 4),
		Credentials: Credentials{Token: "tok-" + lease, ExpiresAt: t0.Add(30 * time.Minute)},
	}
}

func (e *env) start(t *testing.T, a Assignment) int {
	t.Helper()
	i, err := e.pool.Start(a)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// funcHandler is a Handler from a function.
type funcHandler struct {
	cap string
	run func(ctx context.Context, w *Work) (Result, error)
}

func (f funcHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: f.cap, Version: "1.2.0"}
}
func (f funcHandler) Run(ctx context.Context, w *Work) (Result, error) { return f.run(ctx, w) }

func handler(capID string, run func(ctx context.Context, w *Work) (Result, error)) Handler {
	return funcHandler{capID, run}
}

// memLedger is an in-memory Ledger: the first result of a key is kept.
type memLedger struct {
	mu   sync.Mutex
	done map[toolkeys.Op][]byte
	runs int
}

func (l *memLedger) Do(ctx context.Context, op toolkeys.Op, call func(context.Context, string, uint64) ([]byte, error)) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if out, ok := l.done[op]; ok {
		return out, nil
	}
	key, err := toolkeys.Key(op)
	if err != nil {
		return nil, err
	}
	l.runs++
	out, err := call(ctx, key, 1)
	if err == nil {
		l.done[op] = out
	}
	return out, err
}

func progress(phase string) protocol.Progress {
	return protocol.Progress{Phase: phase, NextCheckpoint: "next", RevisedEstimate: protocol.RevisedEstimate{
		CompletionAt: protocol.NewTime(t0.Add(time.Hour)), Confidence: 0.5}}
}

func checkpointMeta(phase string) checkpoint.Meta { return checkpoint.Meta{Phase: phase} }

// contextFor is a Context Package of item's Mission (unsigned: slots does
// not judge signatures), naming its Group in a constraint so isolation
// tests can tell packages apart.
func contextFor(group, mission, item string, constraints ...string) []byte {
	p := protocol.ContextPackage{PackageID: "ctx-" + item, Version: 1,
		Scope:        protocol.ContextScope{MissionID: mission, GroupID: group, WorkItemID: item},
		SourceEvents: protocol.EventRange{GroupID: group, FromSequence: 1, ToSequence: 9},
		Artifacts:    protocol.List[string]{}, Decisions: protocol.List[protocol.Decision]{},
		Constraints: append([]string{"group " + group}, constraints...), OpenQuestions: protocol.List[string]{},
		Generator: protocol.Generator{AgentID: "coord", AgentVersion: "1"}, GeneratedAt: protocol.NewTime(t0),
		Signature: protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: "agent:coord#k1", CreatedAt: protocol.NewTime(t0), Value: strings.Repeat("A", 86)}}
	raw, err := protocol.Marshal(p)
	if err != nil {
		panic(err)
	}
	return raw
}

func testContext(t *testing.T, a Assignment, constraints ...string) []byte {
	t.Helper()
	return contextFor(a.GroupID, a.MissionID, a.WorkItemID, constraints...)
}

// fakeEvents stands for the worker's store: events {"groupId", "sequence"}
// of group only, at most page per answer.
func fakeEvents(group string, page int) func(context.Context, protocol.EventRange, int) ([]json.RawMessage, error) {
	return func(_ context.Context, r protocol.EventRange, max int) ([]json.RawMessage, error) {
		if r.GroupID != group {
			return nil, protocol.Errorf(protocol.CodeMembershipRequired, "not a member of %s", r.GroupID)
		}
		out := []json.RawMessage{}
		for s := r.FromSequence; s <= r.ToSequence && len(out) < min(max, page); s++ {
			out = append(out, json.RawMessage(fmt.Sprintf(`{"groupId":%q,"sequence":%d}`, group, s)))
		}
		return out, nil
	}
}
