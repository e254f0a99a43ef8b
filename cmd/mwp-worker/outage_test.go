package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/handlers/python"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestOutageKillSuite kills `authority serve`, `run` or both with SIGKILL at
// seeded moments while an external handler (testdata/publisher.py, through
// mwpslot) runs items that publish artifacts, and starts what it killed
// again after a seeded outage (MWP_OUTAGE_ROUNDS rounds, default 3;
// MWP_OUTAGE_SEED picks the moments, the victims and the outages). Handlers
// whose uploads meet an outage wait for the authority instead of failing
// (workercmd/upload.go), so in the end every WorkItem is verified with
// exactly one accepted result and none ever failed; the authority's log
// says so.
func TestOutageKillSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	py, err := python.Find()
	if err != nil {
		t.Skip(err)
	}
	rounds := envInt(t, "MWP_OUTAGE_ROUNDS", 3)
	seed := envInt(t, "MWP_OUTAGE_SEED", int(time.Now().UnixNano()%1_000_000))
	t.Logf("MWP_OUTAGE_ROUNDS=%d MWP_OUTAGE_SEED=%d", rounds, seed)
	dir := t.TempDir()
	if err := python.Install(dir); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "publisher.py"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "publisher.py")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	marks := filepath.Join(dir, "publishing")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	k := newCluster(t, "--slots", "2", "--handler-exec", fmt.Sprintf("demo.steps@1.0.0=%s '%s' '%s'", py, script, marks))
	outages(t, k, rounds, seed, marks)
}

// outages is the outage suite on k: rounds kills, seeded by seed. The
// handler writes a file into marks when it is about to publish, 0.3 s
// before it does.
func outages(t *testing.T, k *cluster, rounds, seed int, marks string) {
	rng := rand.New(rand.NewPCG(uint64(seed), 13))
	var workers []*proc
	fail := func(format string, args ...any) {
		t.Helper()
		var logs strings.Builder
		for i, w := range workers {
			fmt.Fprintf(&logs, "worker run %d:\n%s", i+1, w.logs())
		}
		t.Fatalf("MWP_OUTAGE_SEED=%d: %s\n%s\nauthority:\n%s", seed, fmt.Sprintf(format, args...), logs.String(), k.auth.logs())
	}
	// The authority comes back on its port: the worker and the
	// coordinator reconnect to the URL they know.
	u, err := url.Parse(k.auth.await(t, listeningLine, time.Second)[1])
	if err != nil {
		t.Fatal(err)
	}
	authArgs := slices.Clone(k.authArgs)
	authArgs[slices.Index(authArgs, "--listen")+1] = u.Host
	metricsLine := regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`)
	workers = append(workers, k.worker)
	sessions := 1

	const perRound = 4
	var items []string
	// acceptSubmitted accepts every submitted item, as the coordinator;
	// one refused or cut short by a kill is sent again on the next pass.
	acceptSubmitted := func() {
		for _, id := range items {
			if e, ok := k.co.store.Item("grp-a", id); ok && e.State == protocol.WorkSubmitted {
				sendTrying(k, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1}, 2*time.Second)
			}
		}
	}
	failed := func() []string {
		var out []string
		for _, id := range items {
			if e, ok := k.co.store.Item("grp-a", id); ok && e.State == protocol.WorkFailed {
				out = append(out, id)
			}
		}
		return out
	}
	kinds := map[int]int{}
	for round := range rounds {
		roundStart := time.Now()
		for i := range perRound {
			id := fmt.Sprintf("wi-%d-%d", round, i)
			items = append(items, id)
			k.offerTrying(id, rounds+1) // each round kills the worker at most once
		}
		// The victims: the authority, the worker or both; the outage
		// lasts a seeded time, within the worker's offline grace.
		kind := rng.IntN(3)
		if round == 0 {
			kind = 0 // every run, however short, has one upload inside an outage
		}
		kinds[kind]++
		down := time.Duration(400+rng.IntN(1600)) * time.Millisecond
		// The moment: the authority alone goes when a handler is about to
		// publish, so that its upload meets the outage; otherwise a seeded
		// delay into an active run.
		published := len(entries(t, marks))
		for deadline := time.Now().Add(30 * time.Second); ; {
			acceptSubmitted()
			if kind == 0 && len(entries(t, marks)) > published || kind != 0 && activeAny(k, items) {
				break
			}
			if time.Now().After(deadline) {
				fail("round %d: nothing ever ran", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if kind != 0 {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		if kind != 1 {
			_ = k.auth.cmd.Process.Kill()
			k.waitExit(k.auth, 10*time.Second)
		}
		if kind != 0 {
			_ = k.worker.cmd.Process.Kill()
			k.waitExit(k.worker, 10*time.Second)
		}
		time.Sleep(down)
		if kind != 0 {
			if out, err := exec.Command(k.bin, "check", "--data", k.workerDir).CombinedOutput(); err != nil {
				fail("round %d: the killed worker's store does not check sound: %v\n%s", round, err, out)
			}
			k.worker = startProc(t, k.bin, k.workerArgs...)
			workers = append(workers, k.worker)
			k.co.logs = k.worker.logs
			k.workerOps = k.worker.await(t, metricsLine, 10*time.Second)[1]
		}
		if kind != 1 {
			k.auth = startProc(t, k.bin, authArgs...)
			k.authOps = k.auth.await(t, metricsLine, 10*time.Second)[1]
			k.auth.await(t, listeningLine, 10*time.Second)
		}
		if kind != 0 {
			sessions++
			k.worker.await(t, regexp.MustCompile(fmt.Sprintf(`agent w1 session %d open`, sessions)), 30*time.Second)
		}
		if f := failed(); len(f) > 0 {
			fail("round %d: %v failed", round, f)
		}
		t.Logf("round %d: killed the %s for %v; back after %v", round, [...]string{"authority", "worker", "authority and the worker"}[kind], down, time.Since(roundStart).Round(time.Millisecond))
	}
	for deadline := time.Now().Add(120 * time.Second); ; {
		acceptSubmitted()
		if f := failed(); len(f) > 0 {
			fail("%v failed", f)
		}
		done := 0
		for _, id := range items {
			if e, ok := k.co.store.Item("grp-a", id); ok && e.State == protocol.WorkVerified {
				done++
			}
		}
		if done == len(items) {
			break
		}
		if time.Now().After(deadline) {
			fail("%d of %d items verified", done, len(items))
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.stop()

	// The authority's log: one accepted result per item, no failure.
	out, err := exec.Command(k.bin, "inspect", "events", "--data", k.authDir, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	results, starts, fails, publishes := map[string]int{}, map[string]int{}, 0, 0
	for line := range strings.Lines(string(out)) {
		var ev protocol.Event
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Aggregate == nil {
			continue
		}
		switch ev.Type {
		case protocol.EvtWorkResultAccepted:
			results[ev.Aggregate.ID]++
		case protocol.EvtWorkStarted:
			starts[ev.Aggregate.ID]++
		case protocol.EvtWorkFailed:
			fails++
		case protocol.EvtArtifactPublished:
			publishes++
		}
	}
	restarted := 0
	for _, id := range items {
		if results[id] != 1 {
			t.Errorf("MWP_OUTAGE_SEED=%d: %s: %d accepted results, want 1", seed, id, results[id])
		}
		if starts[id] > 1 {
			restarted++
		}
	}
	if fails != 0 {
		t.Errorf("MWP_OUTAGE_SEED=%d: %d work.failed events, want none", seed, fails)
	}
	waited := 0
	for _, w := range workers {
		waited += strings.Count(w.logs(), "waiting for the authority")
	}
	// Every outage of the authority alone began before an upload it then
	// held back: the worker said it waited.
	if kinds[0] > 0 && waited == 0 {
		t.Errorf("MWP_OUTAGE_SEED=%d: %d outages of the authority under an upload, and no transfer waited for it", seed, kinds[0])
	}
	t.Logf("seed %d: %d rounds (authority %d, worker %d, both %d), %d items verified once, %d started again, %d artifacts published, %d transfers waited for the authority",
		seed, rounds, kinds[0], kinds[1], kinds[2], len(items), restarted, publishes, waited)
}

func entries(t *testing.T, dir string) []os.DirEntry {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// sendTrying sends one coordinator command, giving up after within (the
// authority may be down; the caller tries again later).
func sendTrying(k *cluster, typ protocol.CommandType, payload any, within time.Duration) error {
	_, raw, err := protocol.BuildCommand(k.coordActor, k.ck, typ, k.coordEnv, payload, time.Now())
	if err != nil {
		k.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	_, err = k.co.c.Send(ctx, raw)
	return err
}

// offerTrying authorizes and offers id as offer does, each command sent
// again (the same bytes: its receipt) until answered. The contract allows
// attempts attempts, 50 to 100 ms apart: a worker kill costs the run it
// stops an attempt, an outage of the authority must cost none.
func (k *cluster) offerTrying(id string, attempts int) {
	k.t.Helper()
	now := time.Now()
	c := demoContract(id, now)
	c.RetryPolicy.MaxAttempts = uint64(attempts)
	c.RetryPolicy.Backoff = protocol.Backoff{InitialMs: 50, MaxMs: 100, Multiplier: 2}
	send := func(typ protocol.CommandType, payload any) {
		_, raw, err := protocol.BuildCommand(k.coordActor, k.ck, typ, k.coordEnv, payload, now)
		if err != nil {
			k.t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := k.co.c.Send(ctx, raw)
			cancel()
			if err == nil {
				return
			}
			if protocol.CodeOf(err) != protocol.CodeInternalError || time.Now().After(deadline) {
				k.t.Fatalf("%s %s: %v", typ, id, err)
			}
		}
	}
	send(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
	send(protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "demo.steps", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"test"}}}},
		ExpiresAt: protocol.NewTime(now.Add(10 * time.Minute))})
}
