package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestWorkerKillSuite kills `run` with SIGKILL at seeded moments while its
// slots are busy (MWP_WORKER_KILLS kills, default 3; MWP_KILL_SEED) and
// starts it again on the same data directory each time. After every kill
// the store checks sound (`mwp-worker check`); in the end every WorkItem is
// verified with exactly one accepted result, and the worker's cursor is the
// authority's head: nothing lost, nothing applied or completed twice.
func TestWorkerKillSuite(t *testing.T) {
	k := newCluster(t, "--slots", "2", "--demo-step", "150ms")
	kills := envInt(t, "MWP_WORKER_KILLS", 3)
	seed := envInt(t, "MWP_KILL_SEED", int(time.Now().UnixNano()%1_000_000))
	t.Logf("MWP_WORKER_KILLS=%d MWP_KILL_SEED=%d", kills, seed)
	workerKills(t, k, kills, seed, killFault{})
}

// workerKills is the worker kill suite on k, each kill as fault says
// (fault.after runs before the store check and the restart).
func workerKills(t *testing.T, k *cluster, kills, seed int, fault killFault) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	const perRound = 3
	var items []string
	accepted := map[string]bool{}
	// acceptSubmitted accepts every submitted item once, as the coordinator.
	acceptSubmitted := func() {
		for _, id := range items {
			if e, ok := k.co.store.Item("grp-a", id); ok && e.State == protocol.WorkSubmitted && !accepted[id] {
				k.co.do(k.coordActor, k.ck, protocol.CmdWorkAcceptResult, k.coordEnv, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
				accepted[id] = true
			}
		}
	}
	for round := 0; round <= kills; round++ {
		for i := range perRound {
			id := fmt.Sprintf("wi-%d-%d", round, i)
			items = append(items, id)
			k.offerRetrying(id)
		}
		if round == kills {
			break
		}
		// The moment: some run active, then a seeded delay into it.
		for deadline := time.Now().Add(20 * time.Second); ; {
			acceptSubmitted()
			if activeAny(k, items) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: nothing ever ran\n%s", round, k.worker.logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		_ = fault.end(k.worker, rng)
		k.waitExit(k.worker, 10*time.Second)
		if fault.after != nil {
			fault.after(round, rng)
		}
		if out, err := exec.Command(k.bin, "check", "--data", k.workerDir).CombinedOutput(); err != nil {
			t.Fatalf("round %d: the killed worker's store does not check sound: %v\n%s", round, err, out)
		}
		k.worker = startProc(t, k.bin, k.workerArgs...)
		k.co.logs = k.worker.logs
		k.workerOps = k.worker.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`), 10*time.Second)[1]
		k.worker.await(t, regexp.MustCompile(fmt.Sprintf(`agent w1 session %d open`, round+2)), 15*time.Second)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		acceptSubmitted()
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
			t.Fatalf("%d of %d items verified\n%s", done, len(items), k.worker.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Caught up: the worker's cursor reaches the authority's head.
	for deadline := time.Now().Add(10 * time.Second); ; {
		head := metricValue(t, k.authOps, `mwp_authority_group_head{group="grp-a"}`)
		cursor := metricValue(t, k.workerOps, `mwp_worker_group_cursor{group="grp-a"}`)
		if cursor == head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker cursor %v, authority head %v", cursor, head)
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.stop()
	out, err := exec.Command(k.bin, "inspect", "events", "--data", k.authDir, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	results, starts := map[string]int{}, map[string]int{}
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
		}
	}
	restarted := 0
	for _, id := range items {
		if results[id] != 1 {
			t.Errorf("%s: %d accepted results, want 1", id, results[id])
		}
		if starts[id] > 1 {
			restarted++
		}
	}
	t.Logf("%d kills, %d items, all verified once; %d started again after a kill", kills, len(items), restarted)
}

func activeAny(k *cluster, ids []string) bool {
	for _, id := range ids {
		if e, ok := k.co.store.Item("grp-a", id); ok && e.State == protocol.WorkActive {
			return true
		}
	}
	return false
}

// offerRetrying offers id as offer does, with attempts to spare: a run a
// kill interrupts is started again.
func (k *cluster) offerRetrying(id string) {
	now := time.Now()
	c := demoContract(id, now)
	c.RetryPolicy.MaxAttempts = 10
	k.co.do(k.coordActor, k.ck, protocol.CmdWorkAuthorize, k.coordEnv, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
	k.co.do(k.coordActor, k.ck, protocol.CmdWorkOffer, k.coordEnv, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "demo.steps", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"test"}}}},
		ExpiresAt: protocol.NewTime(now.Add(10 * time.Minute))})
}
