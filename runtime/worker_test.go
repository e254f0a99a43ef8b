package runtime

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

func hasLine(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

// The whole 11.3 cycle over authority-lite and real wss: the worker accepts
// two offers, starts both, renews their leases; a critical item arrives
// while both slots are busy, the victim checkpoints at a safe point, the
// critical item starts in its slot and is submitted and accepted; the victim
// later resumes from its checkpoint and is submitted too.
func TestWorkerEndToEndPreemptionCycle(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	if st := tw.w.Status(); st.SessionEpoch != 1 {
		t.Fatalf("session epoch %d, want 1", st.SessionEpoch)
	}
	k.member("w1")
	tw.w.AddGroup("grp-a")

	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	st := k.waitFor("both running", runningAll("wi-1", "wi-2"), tw)
	if len(st.Admissions) != 2 || !st.Admissions[0].Accepted || len(st.Admissions[0].Basis.CapabilityMatches) != 1 {
		t.Fatalf("admissions %+v", st.Admissions)
	}
	if len(st.Selections) != 2 || len(st.Selections[0].Basis.PolicyRulesApplied.Names()) == 0 {
		t.Fatalf("selections %+v", st.Selections)
	}
	// The Mission's priority class reaches the worker's view (authority-lite
	// nests the Mission record in mission.created).
	if len(st.Groups) != 1 || st.Groups[0].PriorityClass != protocol.PriorityHigh {
		t.Fatalf("groups %+v, want grp-a with priority high", st.Groups)
	}

	// Renewal at half the lease: 2 min leases, renewed after 61 s.
	k.fc.Advance(61 * time.Second)
	k.until("leases renewed", func() bool {
		return len(k.item("wi-1").Lease.Renewals) == 1 && len(k.item("wi-2").Lease.Renewals) == 1
	}, tw)
	k.waitFor("renewed expiry applied", func(s WorkerStatus) bool {
		for _, r := range s.Running {
			if !r.LeaseExpiresAt.Equal(k.fc.Now().Add(2 * time.Minute)) {
				return false
			}
		}
		return len(s.Running) == 2
	}, tw)

	// A critical item while both slots are busy. Once it has waited past
	// its aging key (critical: 1 s × 40 %) it ranks above the running
	// items, which are past theirs too.
	k.offer("wi-3", protocol.UrgencyCritical, "w1")
	k.until("wi-3 accepted", func() bool { return k.state("wi-3") == protocol.WorkQueued }, tw)
	k.fc.Advance(time.Second)
	st = k.waitFor("critical item running", runningAll("wi-3"), tw)
	if len(st.Preemptions) != 1 || st.Preemptions[0].Reason != "scheduler" || st.Preemptions[0].For != "grp-a/wi-3" {
		t.Fatalf("preemptions %+v", st.Preemptions)
	}
	victim := st.Preemptions[0].WorkItemID
	other := map[string]string{"wi-1": "wi-2", "wi-2": "wi-1"}[victim]
	if k.state(victim) != protocol.WorkQueued || k.item(victim).Checkpoint == nil {
		t.Fatalf("victim %s: %s, checkpoint %v", victim, k.state(victim), k.item(victim).Checkpoint)
	}

	h.release("wi-3")
	k.until("wi-3 submitted", func() bool { return k.state("wi-3") == protocol.WorkSubmitted }, tw)
	k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-3", ContractRevision: 1})

	h.release(other)
	h.release(victim)
	k.until("all submitted", func() bool {
		return k.state("wi-1") == protocol.WorkSubmitted && k.state("wi-2") == protocol.WorkSubmitted
	}, tw)
	for _, id := range []string{"wi-1", "wi-2"} {
		k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
	}

	// The authority's log tells the cycle in order.
	tr := k.trace()
	cp := hasLine(tr, "work.checkpointed "+victim+" by w1 reason=preempted")
	start3 := hasLine(tr, "work.started wi-3 by w1")
	resumed := hasLine(tr, "work.started "+victim+" by w1 resumed")
	sub3 := hasLine(tr, "work.submitted wi-3 by w1")
	subV := hasLine(tr, "work.submitted "+victim+" by w1")
	if cp < 0 || start3 < cp || resumed < start3 || sub3 < start3 || subV < resumed {
		t.Fatalf("cycle out of order (checkpoint %d, start wi-3 %d, resume %d, submit wi-3 %d, submit victim %d):\n%s",
			cp, start3, resumed, sub3, subV, strings.Join(tr, "\n"))
	}
	if got := h.history(victim); !slices.Equal(got, []string{"fresh", "resumed:0"}) {
		t.Fatalf("victim runs %v, want a fresh run and a resume from its checkpoint", got)
	}
	// Artifacts are in the authority's store, manifests published.
	for _, id := range []string{"wi-1", "wi-2", "wi-3"} {
		if hasLine(tr, "work.result.accepted "+id) < 0 {
			t.Fatalf("%s not accepted:\n%s", id, strings.Join(tr, "\n"))
		}
	}
	published := 0
	for _, ev := range k.events() {
		if ev.Type == protocol.EvtArtifactPublished {
			published++
		}
	}
	if published != 3 {
		t.Fatalf("%d artifacts published, want 3", published)
	}
	// The worker's store agrees once it has caught up.
	k.caughtUp(tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
	st = tw.w.Status()
	store, err := queue.Open(tw.dir, queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, id := range []string{"wi-1", "wi-2", "wi-3"} {
		if e, _ := store.Item("grp-a", id); e.State != protocol.WorkVerified || e.Owner != "w1" {
			t.Fatalf("worker store: %s is %s owned by %q", id, e.State, e.Owner)
		}
	}
	if n := len(st.Outcomes); n != 4 {
		t.Fatalf("outcomes %+v, want 3 completed and 1 preempted", st.Outcomes)
	}
}
