package runtime

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/missionweave/mwp-worker/slots"
)

// wkit is an embedded authority on a fake clock with a human owner, a
// coordinator and Mission mis-a in grp-a.
type wkit struct {
	t     *testing.T
	fc    *clock.Fake
	ac    *skewClock
	auth  *embed.Authority
	px    *proxy
	alice *authoritylite.Principal
	coord *authoritylite.Principal
	logs  *logBuffer // every worker's log, printed when a wait times out
}

// t0 is where every test's fake clock starts.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func testKey(t testing.TB, kind protocol.ActorKind, id string) protocol.PrivateKey {
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newWKit(t *testing.T) *wkit { return newWKitLease(t, 2*time.Minute) }

// newWKitLease is newWKit with another execution lease duration.
func newWKitLease(t *testing.T, lease time.Duration) *wkit { return newWKitWith(t, lease, nil) }

// newWKitWith is newWKitLease with the authority's configuration adjusted.
func newWKitWith(t *testing.T, lease time.Duration, adjust func(*embed.Config)) *wkit {
	return newWKitPinned(t, lease, adjust, nil)
}

// newWKitPinned is newWKitWith whose Group pins the extension profiles
// register returns, after registering them with the authority.
func newWKitPinned(t *testing.T, lease time.Duration, adjust func(*embed.Config), register func(*authoritylite.Service) []protocol.ProfilePin) *wkit {
	fc := clock.NewFake(t0)
	k := &wkit{t: t, fc: fc, ac: &skewClock{base: fc}, logs: &logBuffer{}}
	ecfg := embed.Config{Dir: t.TempDir(), Clock: k.ac,
		Limits: group.Limits{LeaseDuration: lease, StartWithin: 10 * time.Minute},
		Server: wss.Options{IdleTimeout: 24 * time.Hour, PingInterval: 24 * time.Hour, Tick: 20 * time.Millisecond}}
	if adjust != nil {
		adjust(&ecfg)
	}
	auth, err := embed.Start(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	k.auth = auth
	k.px = newProxy(t, auth.Addr.String())
	s := auth.Service
	hk := testKey(t, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	k.alice = s.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	k.coord = k.join("coord")
	var pins []protocol.ProfilePin
	if register != nil {
		pins = register(s)
	}
	k.ok(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "Fix bug", Objective: "ship it", PriorityClass: protocol.PriorityHigh,
		ExtensionProfiles: pins})
	k.ok(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64((10 * time.Hour).Milliseconds())})
	return k
}

// join registers an in-process agent and opens its session.
func (k *wkit) join(id string) *authoritylite.Principal {
	k.t.Helper()
	p := k.auth.Service.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: id}, testKey(k.t, protocol.ActorAgent, id))
	card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id,
		Capabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.2.0"}},
		Roles:        protocol.List[protocol.Role]{protocol.RoleWorker, protocol.RoleCoordinator}, MaxConcurrency: 2}
	if err := p.Join(context.Background(), card); err != nil {
		k.t.Fatalf("join %s: %v", id, err)
	}
	return p
}

func (k *wkit) ok(p *authoritylite.Principal, typ protocol.CommandType, payload any) *protocol.Receipt {
	k.t.Helper()
	r, err := p.Do(context.Background(), typ, "grp-a", payload)
	if err != nil {
		k.t.Fatalf("%s by %s: %v", typ, p.Actor.ID, err)
	}
	return r
}

func (k *wkit) member(id string) {
	k.t.Helper()
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: id}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
}

func contractFor(id string, urgency protocol.Urgency, now time.Time) protocol.WorkContract {
	cpu := 1.0
	return protocol.WorkContract{
		ContractID: "wc-" + id, Revision: 1, Goal: "implement " + id,
		RequiredOutputs: protocol.List[protocol.OutputSpec]{{Name: "patch", MediaType: "text/x-diff"}},
		AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
			{ID: "ac-1", Description: "tests pass", EvidenceRequired: protocol.List[string]{"test-report"}},
			{ID: "ac-2", Description: "lint clean", EvidenceRequired: protocol.List[string]{"lint-report"}},
		},
		Inputs: protocol.List[protocol.InputRef]{}, Dependencies: protocol.List[protocol.Dependency]{},
		AllowedTools: protocol.List[string]{"git"}, AllowedData: protocol.List[string]{"repo:a"},
		AllowedOperations:    protocol.List[string]{"read", "write"},
		ResourceLimits:       protocol.ResourceLimits{CPU: &cpu, MemoryMiB: protocol.Uint64(512)},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.x"}},
		Deadline:             protocol.NewTime(now.Add(24 * time.Hour)), Urgency: urgency,
		BusinessImpact: protocol.ImpactMedium, Budgets: protocol.Budgets{Tokens: protocol.Uint64(1000)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2},
			AttemptTimeoutMs: 3600000, CostLimit: 5},
		Risk: protocol.Risk{Class: protocol.RiskLow},
	}
}

// offer authorizes a WorkItem and offers it to the candidates.
func (k *wkit) offer(id string, urgency protocol.Urgency, candidates ...string) {
	k.t.Helper()
	now := k.ac.Now()
	c := contractFor(id, urgency, now)
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
	k.reoffer(id, "off-"+id, candidates...)
}

func (k *wkit) reoffer(id, offerID string, candidates ...string) {
	k.t.Helper()
	k.offerUntil(id, offerID, k.ac.Now().Add(time.Hour), candidates...)
}

// offerUntil offers item id as offerID until expires (the authority's time).
func (k *wkit) offerUntil(id, offerID string, expires time.Time, candidates ...string) {
	k.t.Helper()
	k.ok(k.coord, protocol.CmdWorkOffer, k.offerPayload(id, offerID, expires, candidates...))
}

// offerPayload is the work.offer of item id to the candidates.
func (k *wkit) offerPayload(id, offerID string, expires time.Time, candidates ...string) *protocol.OfferWorkPayload {
	now := k.ac.Now()
	w, _ := k.auth.Service.WorkItem("grp-a", id)
	cs := protocol.List[protocol.OfferCandidate]{}
	for _, a := range candidates {
		cs = append(cs, protocol.OfferCandidate{AgentID: a, SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"capability-match"}}})
	}
	return &protocol.OfferWorkPayload{WorkItemID: id, OfferID: offerID, Contract: w.Contract, Candidates: cs, ExpiresAt: protocol.NewTime(expires)}
}

func (k *wkit) item(id string) group.WorkItem {
	w, ok := k.auth.Service.WorkItem("grp-a", id)
	if !ok {
		k.t.Fatalf("no WorkItem %s", id)
	}
	return w
}

// events returns the Group's log as decoded events.
func (k *wkit) events() []protocol.Event {
	k.t.Helper()
	evs, err := k.auth.Service.Events("grp-a", 0, 0)
	if err != nil {
		k.t.Fatal(err)
	}
	out := make([]protocol.Event, len(evs))
	for i, se := range evs {
		if err := json.Unmarshal(se.Raw, &out[i]); err != nil {
			k.t.Fatal(err)
		}
	}
	return out
}

// trace renders the WorkItem events of the log as "type item [detail]".
func (k *wkit) trace() []string {
	var out []string
	for _, ev := range k.events() {
		if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateWorkItem {
			continue
		}
		var p struct {
			CheckpointReason string `json:"checkpointReason"`
			Resume           string `json:"resumeFromCheckpointId"`
			Reason           string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		s := string(ev.Type) + " " + ev.Aggregate.ID + " by " + ev.Actor.ID
		if p.CheckpointReason != "" {
			s += " reason=" + p.CheckpointReason
		}
		if p.Resume != "" {
			s += " resumed"
		}
		out = append(out, s)
	}
	return out
}

// worker builds a Worker of agent id connected through the proxy.
type testWorker struct {
	w      *Worker
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func (k *wkit) workerConfig(id, dir string, h slots.Handler, nslots int) WorkerConfig {
	cfg := WorkerConfig{
		Dir: dir, Key: k.workerKey(dir, id), AgentID: id,
		Card:     protocol.AgentCard{MaxConcurrency: uint64(nslots)},
		Handlers: []slots.Handler{h}, Clock: k.fc, Tick: time.Second, Estimate: 10 * time.Minute,
		Logger:       k.logs.logger(id),
		DrainTimeout: 10 * time.Second,
		Client:       client.Config{PingInterval: -1, Backoff: client.Backoff{Base: 100 * time.Millisecond, Jitter: client.JitterNone}},
	}
	cfg.UseInProcess(k.auth)
	cfg.URL = k.px.url()
	return cfg
}

// logBuffer keeps the workers' debug logs of one test (the last 2,000
// lines), to print when a wait times out; with MWP_TEST_LOG set they go to
// stderr as they come.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	if os.Getenv("MWP_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.TrimRight(string(p), "\n"))
	if len(b.lines) > 2000 {
		b.lines = b.lines[len(b.lines)-2000:]
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

func (b *logBuffer) logger(agent string) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})).With("agent", agent)
}

var (
	keysMu sync.Mutex
	keys   = map[string]protocol.PrivateKey{}
)

// workerKey is one key per worker directory, so a restart keeps it.
func (k *wkit) workerKey(dir, id string) protocol.PrivateKey {
	keysMu.Lock()
	defer keysMu.Unlock()
	if key, ok := keys[dir]; ok {
		return key
	}
	key := testKey(k.t, protocol.ActorAgent, id)
	keys[dir] = key
	return key
}

func (k *wkit) start(cfg WorkerConfig) *testWorker {
	k.t.Helper()
	w, err := NewWorker(cfg)
	if err != nil {
		k.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{w: w, dir: cfg.Dir, cancel: cancel, done: make(chan error, 1)}
	go func() { tw.done <- w.Run(ctx) }()
	k.t.Cleanup(func() { tw.stop(k.t) })
	k.waitFor("worker online", func(s WorkerStatus) bool { return s.Offline == "online" }, tw)
	return tw
}

// stop drains the worker and returns Run's error.
func (tw *testWorker) stop(t *testing.T) error {
	tw.cancel()
	select {
	case err := <-tw.done:
		tw.done <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop")
		return nil
	}
}

// waitFor polls the worker's status until cond holds (bounded, real time:
// the worker's goroutines run concurrently with the test).
func (k *wkit) waitFor(what string, cond func(WorkerStatus) bool, tw *testWorker) WorkerStatus {
	k.t.Helper()
	return k.until(what, func() bool { return cond(tw.w.Status()) }, tw)
}

func (k *wkit) until(what string, cond func() bool, tw *testWorker) WorkerStatus {
	k.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			if tw == nil {
				return WorkerStatus{}
			}
			return tw.w.Status()
		}
		select {
		case err := <-tw.doneOrNil():
			tw.done <- err
			k.t.Fatalf("waiting for %s: worker stopped: %v", what, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	st := WorkerStatus{}
	if tw != nil {
		st = tw.w.Status()
	}
	b, _ := json.MarshalIndent(st, "", " ")
	k.t.Fatalf("timed out waiting for %s\nstatus %s\ntrace:\n%s\nworker log:\n%s", what, b, strings.Join(k.trace(), "\n"), k.logs)
	return st
}

func (tw *testWorker) doneOrNil() chan error {
	if tw == nil {
		return nil
	}
	return tw.done
}

func runningAll(ids ...string) func(WorkerStatus) bool {
	return func(s WorkerStatus) bool {
		got := map[string]bool{}
		for _, r := range s.Running {
			got[r.WorkItemID] = true
		}
		for _, id := range ids {
			if !got[id] {
				return false
			}
		}
		return true
	}
}

// caughtUp waits until the worker's durable cursor reaches the log's end.
func (k *wkit) caughtUp(tw *testWorker) {
	k.t.Helper()
	// The authority's state (k.item) leads its log: wait for what it has
	// decided to be durable, then for the worker to have it.
	decided := k.auth.Service.DecidedSequence("grp-a")
	k.until("authority log durable", func() bool { return k.auth.Service.LastSequence("grp-a") >= decided }, tw)
	last := k.auth.Service.LastSequence("grp-a")
	k.waitFor("store caught up", func(s WorkerStatus) bool {
		for _, g := range s.Groups {
			if g.GroupID == "grp-a" {
				return g.Cursor >= last
			}
		}
		return false
	}, tw)
	// And every answer: the events a command caused can arrive before its
	// answer, and a test that freezes the connection next would hold that
	// answer back, and the item's next command behind it.
	k.until("every answer in", func() bool { return gathered(k.t, tw.w, "mwp_worker_commands_awaiting_answer", nil) == 0 }, tw)
}

func (k *wkit) state(id string) protocol.WorkItemState { return k.item(id).State }

func itoa(n int) string { return fmt.Sprint(n) }
