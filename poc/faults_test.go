package poc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

func TestParseFaults(t *testing.T) {
	cases := []struct {
		in   string
		want []FaultName
		err  string
	}{
		{"", nil, ""},
		{"  ", nil, ""},
		{"all", AllFaults, ""},
		{"change-request, lease-expiry", []FaultName{FaultLeaseExpiry, FaultChangeRequest}, ""},
		{"worker-restart,worker-restart", []FaultName{FaultWorkerRestart}, ""},
		{"duplicate-delivery,worker-restart,coordinator-failover,group-disconnect,lease-expiry,priority-arrival,change-request", AllFaults, ""},
		{"lease-expiry,nope", nil, `unknown fault "nope" (valid: all, duplicate-delivery`},
		{"all,lease-expiry", nil, "cannot be combined"},
		{"lease-expiry,,change-request", nil, "empty name"},
		{"Lease-Expiry", nil, "unknown fault"},
	}
	for _, c := range cases {
		got, err := ParseFaults(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	if len(AllFaults) != 7 {
		t.Fatalf("the suite has %d faults, spec 22 names 7", len(AllFaults))
	}
}

// The journal survives a crash: records are fsynced one line each, a torn
// last line is ignored, a corrupt middle line is an error.
func TestJournalCrashReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), JournalFile)
	if got, err := ReadJournal(path); err != nil || got != nil {
		t.Fatalf("missing journal: %v %v", got, err)
	}
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(Injection{Fault: "meteor"}); err == nil {
		t.Fatal("unknown fault recorded")
	}
	for _, f := range []FaultName{FaultWorkerRestart, FaultLeaseExpiry} {
		if err := j.Record(Injection{Fault: f, Worker: "w1", At: protocol.NewTime(base)}); err != nil {
			t.Fatal(err)
		}
	}
	// A crash mid-write leaves a torn line; the journal is not closed.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"fault":"change-req`)
	f.Close()
	got, err := ReadJournal(path)
	if err != nil || len(got) != 2 || got[1].Fault != FaultLeaseExpiry {
		t.Fatalf("after a torn write: %+v %v", got, err)
	}
	j.Close()
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, append([]byte("garbage\n"), raw...), 0o600)
	if _, err := ReadJournal(path); err == nil {
		t.Fatal("a corrupt record was accepted")
	}
}

// change-request, for real: the owner requests changes on Mission B; the
// coordinator authorizes rework stages on top of the verified patch, has
// them verified, resubmits; the owner approves. The fault check holds;
// the same stores without the resubmission break it.
func TestChangeRequestFault(t *testing.T) {
	r := newRig(t, nil)
	spec := MissionB(time.Now())
	w1 := r.worker("w1", 2)
	coord := r.coordinator("coord-b", spec, "w1")
	if err := StartMission(r.ctx, r.owner, spec, "coord-b", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	go w1.follow(r.ctx, spec.GroupID)
	j, err := OpenJournal(filepath.Join(r.dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	errc := runCoord(r.ctx, coord)
	r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errc)
	before := r.svc.LastSequence(spec.GroupID)
	changes := []string{"Note in the changelog that Abs(math.MinInt) overflows"}
	if err := RequestChanges(r.ctx, j, r.owner, spec, changes, "please document the edge case", r.svc.Now()); err != nil {
		t.Fatal(err)
	}
	r.waitMission(spec.GroupID, protocol.MissionActive, errc)
	r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errc)
	r.approve(spec, "apr-b-2")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wi-b-impl-r1", "wi-b-test-r1", "wi-b-review-r1"} {
		if w, _ := r.svc.WorkItem(spec.GroupID, id); w.State != protocol.WorkVerified {
			t.Fatalf("%s is %s", id, w.State)
		}
	}
	// The rework patch only adds the requested changelog line, on top of
	// the first patch.
	rw, _ := r.svc.WorkItem(spec.GroupID, "wi-b-impl-r1")
	if !slices.ContainsFunc(rw.Contract.Inputs, func(in protocol.InputRef) bool { return in.Name == OutBasePatch }) {
		t.Fatalf("rework inputs %+v", rw.Contract.Inputs)
	}
	st := RunStores{Log: r.svc, Missions: []MissionSpec{spec}, Journal: filepath.Join(r.dir, JournalFile)}
	res := CheckFaults([]FaultName{FaultChangeRequest, FaultLeaseExpiry}, st)
	if !res[0].Injected || !res[0].Held || !strings.Contains(res[0].Detail, "3 rework items verified") {
		t.Fatalf("change-request: %+v", res[0])
	}
	if res[1].Injected || res[1].Held {
		t.Fatalf("a fault never injected: %+v", res[1])
	}
	var patch []byte
	for _, ev := range r.events(spec.GroupID) {
		if ev.Seq() > before && ev.Type == protocol.EvtArtifactPublished && ev.Actor.ID == "w1" {
			var p struct{ Manifest protocol.ArtifactManifest }
			mustJSON(t, ev.Payload, &p)
			if p.Manifest.MediaType == MediaDiff {
				patch, _ = r.svc.Artifact(p.Manifest.ContentHash)
			}
		}
	}
	if changes, err := ParsePatch(string(patch)); err != nil || len(changes) != 1 || changes[0].Path != "CHANGELOG.md" ||
		!strings.Contains(strings.Join(changes[0].Added, "\n"), "math.MinInt") {
		t.Fatalf("rework patch %v:\n%s", err, patch)
	}
	// Broken: the log ends before the resubmission.
	broken := st
	broken.Log = editedLog{r.svc, spec.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent { return evs[:before+3] }}
	if res := CheckFault(FaultChangeRequest, broken, mustJournal(t, st.Journal), nil); !res.Injected || res.Held {
		t.Fatalf("truncated log: %+v", res)
	}
}

func mustJournal(t *testing.T, path string) []Injection {
	t.Helper()
	in, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// lease-expiry, for real on a fake clock: w1 (ranked first; Mission B's
// items go to one worker at a time) wins Mission B's implementation and
// stalls holding its result; the lease lapses; the coordinator re-offers with the lapsed epoch fenced and without w1; w2
// completes it under a higher epoch; w1's late result is refused and kept
// for audit only.
func TestLeaseExpiryFault(t *testing.T) {
	clk := clock.NewFake(time.Now())
	r := newRig(t, clk)
	spec := MissionB(clk.Now())
	w1, w2 := r.worker("w1", 1), r.worker("w2", 2)
	w1.stalled["wi-b-impl"] = true
	coord := r.coordinator("coord-b", spec, "w2", "w1")
	if err := StartMission(r.ctx, r.owner, spec, "coord-b", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	go w1.follow(r.ctx, spec.GroupID) // w2 is not listening yet
	errc := runCoord(r.ctx, coord)
	var stalled slots.Outcome
	select {
	case stalled = <-w1.held:
	case err := <-errc:
		t.Fatalf("coordinator: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("w1 never ran the implementation")
	}
	if stalled.Kind != slots.Completed || stalled.Slot.OwnershipEpoch != 1 {
		t.Fatalf("stalled run %+v", stalled)
	}
	clk.Advance(3 * time.Minute) // past the two-minute execution lease
	coord.Poke()
	// Once the item is offered again (the lapsed epoch fenced, w1 left
	// out), w1 wakes up and sends its result under the fenced epoch.
	r.waitItem(spec.GroupID, "wi-b-impl", "offered to w2 alone", func(w group.WorkItem) bool {
		return w.State == protocol.WorkOffered && w.Offer != nil && slices.Equal(w.Offer.Candidates, []string{"w2"})
	}, errc)
	s := stalled.Slot
	_, err := w1.p.Do(r.ctx, protocol.CmdWorkSubmit, s.GroupID, &protocol.SubmitWorkPayload{WorkItemID: s.WorkItemID, OwnershipEpoch: s.OwnershipEpoch,
		LeaseID: s.LeaseID, Artifacts: stalled.Result.Artifacts, Evidence: stalled.Result.Evidence})
	mustErrCode(t, err, protocol.CodeWorkStaleOwnership)
	go w2.follow(r.ctx, spec.GroupID)
	j, err := OpenJournal(filepath.Join(r.dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(Injection{Fault: FaultLeaseExpiry, At: protocol.NewTime(clk.Now()), Worker: "w1", Group: spec.GroupID, WorkItem: "wi-b-impl", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	r.waitMission(spec.GroupID, protocol.MissionAwaitingApproval, errc)
	r.approve(spec, "apr-b-1")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	item, _ := r.svc.WorkItem(spec.GroupID, "wi-b-impl")
	if item.Ownership == nil || item.Ownership.OwnerAgentID != "w2" || item.Ownership.OwnershipEpoch != 2 {
		t.Fatalf("final ownership %+v", item.Ownership)
	}
	st := RunStores{Log: r.svc, Missions: []MissionSpec{spec}, Journal: filepath.Join(r.dir, JournalFile)}
	res := CheckFault(FaultLeaseExpiry, st, mustJournal(t, st.Journal), nil)
	if !res.Injected || !res.Held || !strings.Contains(res.Detail, "completed under epoch 2; its late work.submit refused WORK_STALE_OWNERSHIP") || res.Evidence["lateCommandsRefused"] != 1 {
		t.Fatalf("lease-expiry: %+v", res)
	}
	if inv := CheckNoStaleCompletion(r.svc, []string{spec.GroupID}); !inv.Held || !strings.Contains(inv.Detail, "1 late results") {
		t.Fatalf("stale owner invariant: %+v", inv)
	}
	// Broken: a journal naming an epoch that was never fenced.
	bad := []Injection{{Fault: FaultLeaseExpiry, Worker: "w2", Group: spec.GroupID, WorkItem: "wi-b-impl", Epoch: 2}}
	if res := CheckFault(FaultLeaseExpiry, st, bad, nil); res.Injected || res.Held {
		t.Fatalf("unfenced epoch: %+v", res)
	}
}

// preemptionLog drives one WorkItem of Mission B by hand on a real
// authority: started, checkpointed with reason preempted, started again
// (from the checkpoint when resume is set), submitted and accepted.
func preemptionLog(t *testing.T, pl preemptionPlot) (*rig, MissionSpec) {
	clk := clock.NewFake(time.Now())
	r := newRig(t, clk)
	spec := MissionB(time.Now())
	w1 := r.worker("w1", 1)
	coordKey := mustKey(t, protocol.ActorAgent, "coord")
	coord := r.svc.Principal(agent("coord"), coordKey)
	if err := coord.Join(r.ctx, AgentCard("coord", nil, 1, protocol.RoleCoordinator)); err != nil {
		t.Fatal(err)
	}
	if err := StartMission(r.ctx, r.owner, spec, "coord", time.Hour); err != nil {
		t.Fatal(err)
	}
	do := func(p interface {
		Do(context.Context, protocol.CommandType, string, any, ...func(*protocol.Envelope)) (*protocol.Receipt, error)
	}, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(r.ctx, typ, spec.GroupID, payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	st := spec.WorkStages()[0]
	id := st.WorkItemID
	now := r.svc.Now()
	do(coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w1"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	do(coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: spec.MissionID, Contract: st.Contract})
	do(coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-1", Contract: st.Contract,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches: protocol.List[protocol.CapabilityMatch]{{ID: CapImplement, Required: "1.x", Offered: HandlerVersion}},
			ExpectedCost:      protocol.Budgets{ToolCalls: protocol.Uint64(0)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"hand-made"}}}},
		ExpiresAt: protocol.NewTime(now.Add(time.Minute))})
	do(w1.p, protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-1", ContractRevision: 1,
		ScheduleDisclosure: protocol.ScheduleDisclosure{CapacityState: protocol.CapacityAvailable}})
	do(w1.p, protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: 1})
	item, _ := r.svc.WorkItem(spec.GroupID, id)
	// The critical item arrives before the preemption, or (late) after it.
	crit := st.Contract
	crit.ContractID, crit.Urgency, crit.BusinessImpact = "wc-critical", protocol.UrgencyCritical, protocol.ImpactCritical
	arrive := func() {
		do(coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-critical", MissionID: spec.MissionID, Contract: crit})
		clk.Advance(time.Second)
	}
	if !pl.late {
		arrive()
	}
	prog := protocol.Progress{Phase: "write code and test", NextCheckpoint: "resume", MilestonesCompleted: protocol.List[string]{}, Blockers: protocol.List[string]{},
		RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(now.Add(time.Minute))}, EvidenceRefs: protocol.List[string]{}}
	do(w1.p, protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{WorkItemID: id, OwnershipEpoch: 1, LeaseID: item.Lease.LeaseID,
		CheckpointID: "ck-1", StateDigest: protocol.Digest([]byte("state")), Progress: prog, Reason: protocol.CheckpointPreempted})
	clk.Advance(time.Second)
	if pl.late {
		arrive()
	}
	if !pl.neverStarts {
		// The critical item takes the freed slot.
		do(coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-critical", OfferID: "off-c", Contract: crit,
			Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
				CapabilityMatches: protocol.List[protocol.CapabilityMatch]{{ID: CapImplement, Required: "1.x", Offered: HandlerVersion}},
				ExpectedCost:      protocol.Budgets{ToolCalls: protocol.Uint64(0)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
				PolicyRulesApplied: protocol.List[string]{"critical-arrival"}}}},
			ExpiresAt: protocol.NewTime(clk.Now().Add(time.Minute))})
		do(w1.p, protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-critical", OfferID: "off-c", ContractRevision: 1,
			ScheduleDisclosure: protocol.ScheduleDisclosure{CapacityState: protocol.CapacityAvailable}})
		do(w1.p, protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-critical", OwnershipEpoch: 1})
		clk.Advance(time.Second)
	}
	sp := &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: 1}
	if pl.resume {
		sp.ResumeFromCheckpointID = "ck-1"
	}
	do(w1.p, protocol.CmdWorkStart, sp)
	item, _ = r.svc.WorkItem(spec.GroupID, id)
	data := []byte("--- /dev/null\n+++ b/x\n@@ -0,0 +1,1 @@\n+x\n")
	d, _ := r.svc.PutArtifact(data)
	m, err := SignManifest(r.svc, w1.key, "w1", ManifestFields{MediaType: MediaDiff, MissionID: spec.MissionID, GroupID: spec.GroupID, WorkItemID: id, Data: data, At: now})
	if err != nil {
		t.Fatal(err)
	}
	do(w1.p, protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(1), LeaseID: item.Lease.LeaseID})
	do(w1.p, protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: id, OwnershipEpoch: 1, LeaseID: item.Lease.LeaseID,
		Artifacts: protocol.List[string]{d}, Evidence: EvidenceFor(st.Contract, id, agent("w1"), now, map[string]piece{
			EvPatchApplies: {Result: protocol.EvidencePass, Method: "hand"}, EvTestsTouched: {Result: protocol.EvidencePass, Method: "hand"}})})
	do(coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
	return r, spec
}

// preemptionPlot varies preemptionLog: resume (the victim restarts from
// its checkpoint), late (the critical item arrives only after the
// preemption, which therefore was not for it), neverStarts (the critical
// item is never offered).
type preemptionPlot struct{ resume, late, neverStarts bool }

func TestPriorityArrivalCheck(t *testing.T) {
	journal := func(g string) []Injection {
		return []Injection{{Fault: FaultPriorityArrival, Group: g, WorkItem: "wi-critical"}}
	}
	for _, c := range []struct {
		name           string
		plot           preemptionPlot
		injected, held bool
		detail         string
	}{
		{"held", preemptionPlot{resume: true}, true, true, "grp-b/wi-b-impl asked to yield for wi-critical, reached a safe point 0s later (checkpoint ck-1), resumed from it, verified"},
		{"victim not resumed", preemptionPlot{}, true, false, "never resumed"},
		{"critical item never started", preemptionPlot{resume: true, neverStarts: true}, true, false, "critical item wi-critical never started"},
		// A preemption before the critical item arrived (a shutdown
		// checkpoints the same way) is not the injection.
		{"preemption before the arrival", preemptionPlot{resume: true, late: true}, false, false, "between the critical item's arrival and its start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, spec := preemptionLog(t, c.plot)
			// The worker's log asked the victim to yield when it checkpointed.
			var obs []Observation
			evs, _, _ := readLog(r.svc, spec.GroupID)
			for _, e := range evs {
				if e.Type == protocol.EvtWorkCheckpointed && e.Aggregate != nil {
					obs = append(obs, Observation{Worker: "w1", Moment: MomentStopped,
						Preemptions: []Preemption{{GroupID: spec.GroupID, WorkItemID: e.Aggregate.ID, For: "wi-critical", Reason: "scheduler", At: e.OccurredAt.Time}}})
				}
			}
			res := CheckFault(FaultPriorityArrival, RunStores{Log: r.svc, Missions: []MissionSpec{spec}}, journal(spec.GroupID), obs)
			if res.Injected != c.injected || res.Held != c.held || !strings.Contains(res.Detail, c.detail) {
				t.Fatalf("%+v, want injected %v held %v detail ~%q", res, c.injected, c.held, c.detail)
			}
		})
	}
	spec := MissionB(time.Now())
	// Journaled, but no critical item and no preemption in the log: not
	// injected.
	r2 := newRig(t, nil)
	if err := r2.svc.Principal(agent("nobody"), mustKey(t, protocol.ActorAgent, "nobody")).Join(r2.ctx, AgentCard("nobody", nil, 1, protocol.RoleCoordinator)); err != nil {
		t.Fatal(err)
	}
	if err := StartMission(r2.ctx, r2.owner, spec, "nobody", time.Hour); err != nil {
		t.Fatal(err)
	}
	if res := CheckFault(FaultPriorityArrival, RunStores{Log: r2.svc, Missions: []MissionSpec{spec}}, journal(spec.GroupID), nil); res.Injected {
		t.Fatalf("no preemption: %+v", res)
	}
}

// The worker faults are judged from the worker stores: a store that got
// every event twice (duplicate delivery) and was reopened (restart) holds;
// one whose cursor is behind the reconnection point, or whose queue
// disagrees with the authority, does not.
func TestWorkerFaultChecks(t *testing.T) {
	r, a, b := runBoth(t)
	w1 := filepath.Join(r.dir, "w1")
	projectStore(t, r, w1, a.GroupID, b.GroupID)
	last := r.svc.LastSequence(a.GroupID)
	st := RunStores{Log: r.svc, Missions: []MissionSpec{a, b}, Workers: map[string]string{"w1": w1}}
	journal := []Injection{
		{Fault: FaultDuplicateDelivery, Worker: "w1", Group: a.GroupID, Sequence: 1},
		{Fault: FaultWorkerRestart, Worker: "w1"},
		{Fault: FaultGroupDisconnect, Worker: "w1", Group: a.GroupID, Sequence: last},
	}
	obs := []Observation{
		{Worker: "w1", Moment: "duplicate-delivery:before", Counters: map[string]float64{seriesDuplicates: 3}},
		{Worker: "w1", Moment: "duplicate-delivery:after", Counters: map[string]float64{seriesDuplicates: 8}},
		{Worker: "w1", Moment: "group-disconnect:before", Counters: map[string]float64{seriesConnections: 1}},
		{Worker: "w1", Moment: "group-disconnect:after", Counters: map[string]float64{seriesConnections: 2},
			Reconciled: []runtime.ReconcileLog{{Type: "lease.renew", Outcome: "applied"}}},
	}
	for _, f := range []FaultName{FaultDuplicateDelivery, FaultGroupDisconnect} {
		if res := CheckFault(f, st, journal, obs); !res.Injected || !res.Held {
			t.Errorf("%s: %+v", f, res)
		}
	}
	// Nothing counted: no duplicate dropped, no reconnection.
	flat := []Observation{obs[0], {Worker: "w1", Moment: "duplicate-delivery:after", Counters: obs[0].Counters}, obs[2], {Worker: "w1", Moment: "group-disconnect:after", Counters: obs[2].Counters}}
	for _, f := range []FaultName{FaultDuplicateDelivery, FaultGroupDisconnect} {
		if res := CheckFault(f, st, journal, flat); res.Injected || res.Held {
			t.Errorf("%s without evidence: %+v", f, res)
		}
	}
	// No run of this log resumed from a checkpoint.
	if res := CheckFault(FaultWorkerRestart, st, journal, nil); res.Held || !strings.Contains(res.Detail, "0 runs resumed") {
		t.Errorf("restart without resumption: %+v", res)
	}
	// Behind the reconnection point.
	behind := append([]Injection(nil), journal...)
	behind[2].Sequence = last + 5
	if res := CheckFault(FaultGroupDisconnect, st, behind, obs); !res.Injected || res.Held || !strings.Contains(res.Detail, "behind") {
		t.Errorf("cursor behind: %+v", res)
	}
	// A queue whose projection disagrees with the authority: the log
	// seen by the check ends before the last results.
	short := st
	short.Log = editedLog{r.svc, a.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent { return evs[:len(evs)-6] }}
	if res := CheckFault(FaultWorkerRestart, short, journal, nil); !res.Injected || res.Held || !strings.Contains(res.Detail, "queue says") {
		t.Errorf("queue disagrees: %+v", res)
	}
	if res := CheckFault(FaultWorkerRestart, st, []Injection{{Fault: FaultWorkerRestart, Worker: "w9"}}, nil); res.Held {
		t.Errorf("unknown worker: %+v", res)
	}
	if res := CheckFault(FaultDuplicateDelivery, st, nil, nil); res.Injected || res.Held || !strings.Contains(res.Detail, "no journal record") {
		t.Errorf("no journal: %+v", res)
	}
}

func FuzzReadJournal(f *testing.F) {
	f.Add([]byte(`{"fault":"lease-expiry","at":"2026-11-30T08:00:00Z","worker":"w1"}` + "\n"))
	f.Add([]byte("{\"fault\":\"x\"}\n{"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		path := filepath.Join(t.TempDir(), JournalFile)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = ReadJournal(path)
	})
}
