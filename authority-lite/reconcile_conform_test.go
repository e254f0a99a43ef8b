package authoritylite

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// childWork sets up a parent Mission mis-p (grp-p) with a 1,000-token
// budget, a child Mission mis-c (grp-c) linked to its WorkItem, and wi-c
// in the child Group active under w1 with a 5,000-token contract budget.
func childWork(t *testing.T, k *svc) group.WorkItem {
	t.Helper()
	ctx := context.Background()
	do := func(p *Principal, grp string, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(ctx, typ, grp, payload); err != nil {
			t.Fatalf("%s in %s: %v", typ, grp, err)
		}
	}
	k.ok(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-p", Title: "parent", Objective: "o", PriorityClass: protocol.PriorityNormal,
		Budgets: &protocol.Budgets{Tokens: protocol.Uint64(1000)}}, func(e *protocol.Envelope) { e.GroupID = "grp-p" })
	do(k.alice, "grp-p", protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-p", AgentID: "coord", LeaseDurationMs: 36000000})
	c := testContract("wi-p")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	do(k.coord, "grp-p", protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-p", MissionID: "mis-p", Contract: c})
	do(k.coord, "grp-p", protocol.CmdMissionCreateChild, &protocol.CreateChildMissionPayload{MissionID: "mis-p", ParentWorkItemID: "wi-p",
		ChildMissionID: "mis-c", ChildGroupID: "grp-c", Title: "child", Objective: "o", OnChildFailure: protocol.ChildFailureFail})
	do(k.alice, "grp-c", protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-c", AgentID: "coord", LeaseDurationMs: 36000000})
	do(k.coord, "grp-c", protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w1"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	cc := testContract("wi-c")
	cc.RetryPolicy.AttemptTimeoutMs, cc.RetryPolicy.CostLimit = 600000, 5
	cc.Budgets = protocol.Budgets{Tokens: protocol.Uint64(5000)}
	cc.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
	do(k.coord, "grp-c", protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-c", MissionID: "mis-c", Contract: cc})
	do(k.coord, "grp-c", protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-c", OfferID: "off-c", Contract: cc,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
	do(k.w["w1"], "grp-c", protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-c", OfferID: "off-c", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
	w, _ := k.s.WorkItem("grp-c", "wi-c")
	do(k.w["w1"], "grp-c", protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-c", OwnershipEpoch: w.Ownership.OwnershipEpoch})
	w, _ = k.s.WorkItem("grp-c", "wi-c")
	return w
}

// bufferedIn is w1's offline lease_renew for w in grp, bound to its lease,
// with a fresh actionId and the given usage delta.
func (k *svc) bufferedIn(grp string, w group.WorkItem, disconnected time.Time, usage protocol.Usage) []byte {
	k.t.Helper()
	l := w.Lease
	b := protocol.OfflineBinding{AgentID: "w1", GroupID: grp, WorkItemID: w.WorkItemID, OriginalSessionEpoch: l.SessionEpoch,
		OwnershipEpoch: l.OwnershipEpoch, HistoricalLeaseID: l.LeaseID, DisconnectedAt: protocol.NewTime(disconnected),
		BufferedAt: protocol.NewTime(disconnected.Add(5 * time.Second)), GraceDeadline: protocol.NewTime(l.ExpiresAt.Add(OfflineGrace)),
		HistoricalLeaseExpiresAt: l.ExpiresAt, UsageDelta: usage}
	data, err := json.Marshal(b)
	if err != nil {
		k.t.Fatal(err)
	}
	_, raw, err := k.w["w1"].Build(protocol.CmdLeaseRenew, grp, &protocol.RenewLeasePayload{WorkItemID: w.WorkItemID, OwnershipEpoch: l.OwnershipEpoch, LeaseID: l.LeaseID, Progress: progress(disconnected)},
		func(e *protocol.Envelope) {
			e.Extensions = protocol.Extensions{protocol.OfflineExtensionURI: {Critical: true, Data: data}}
		})
	if err != nil {
		k.t.Fatal(err)
	}
	return raw
}

func (k *svc) descendantTokens(grp string) uint64 {
	gs := k.s.group(grp)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.descendants.Tokens
}

// Reconciling buffered progress is one transaction in the order spec 11.5
// gives: resource_usage_recorded first, the charge of the WorkItem and of
// every ancestor Mission, then the progress itself; an overflow of an
// ancestor's budget refuses charge and progress together, leaving no
// event in either Group.
func TestReconcileChargesBeforeApplyUpTheAncestry(t *testing.T) {
	k := newSvc(t)
	w := childWork(t, k)
	disc := k.clk.Now().Add(5 * time.Second)
	raw := k.bufferedIn("grp-c", w, disc, protocol.Usage{Tokens: 300})
	k.clk.Advance(20 * time.Second)
	lastC := k.s.LastSequence("grp-c")
	r, err := k.submitRaw(raw)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	evs := checkLog(t, k.s, "grp-c")[lastC:]
	var types []protocol.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if len(evs) != 2 || len(r.Events) != 2 || types[0] != protocol.EvtResourceUsageRecorded || types[1] != protocol.EvtWorkProgressed {
		t.Fatalf("reconciliation appended %v (receipt %d events), want resource_usage_recorded then work.progressed", types, len(r.Events))
	}
	if evs[0].Seq() >= evs[1].Seq() || evs[0].Rev() >= evs[1].Rev() {
		t.Fatalf("usage at sequence %d revision %d, progress at %d/%d: the charge must come first", evs[0].Seq(), evs[0].Rev(), evs[1].Seq(), evs[1].Rev())
	}
	var rec group.UsageRecorded
	if err := json.Unmarshal(evs[0].Payload, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.UsageDelta.Tokens != 300 || rec.UsedTotal.Tokens != 300 || rec.LeaseID != w.Lease.LeaseID || rec.HistoricalSessionEpoch == 0 || rec.ReconcilingSessionEpoch == 0 {
		t.Fatalf("usage record %+v", rec)
	}
	if u := k.s.Usage("grp-c", "wi-c"); u.Tokens != 300 {
		t.Fatalf("the item was charged %d tokens, want 300", u.Tokens)
	}
	if got := k.descendantTokens("grp-p"); got != 300 {
		t.Fatalf("the parent Mission was charged %d tokens, want 300", got)
	}

	// 300 + 800 fits the child's 5,000 but not the parent's 1,000.
	w, _ = k.s.WorkItem("grp-c", "wi-c")
	over := k.bufferedIn("grp-c", w, disc.Add(time.Second), protocol.Usage{Tokens: 800})
	lastC, lastP := k.s.LastSequence("grp-c"), k.s.LastSequence("grp-p")
	_, err = k.submitRaw(over)
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeBudgetExceeded || pe.Details["scope"] != "ancestorMission" {
		t.Fatalf("buffered progress over the parent's budget: %v", err)
	}
	after, _ := k.s.WorkItem("grp-c", "wi-c")
	if k.s.LastSequence("grp-c") != lastC || k.s.LastSequence("grp-p") != lastP || after.Revision != w.Revision ||
		k.s.Usage("grp-c", "wi-c").Tokens != 300 || k.descendantTokens("grp-p") != 300 {
		t.Fatal("a refused reconciliation left a partial event or charge")
	}
}

// The authority's record of a lease follows the lease (spec 11.5 checks
// buffered work against it): renewed live, it stays open, and progress
// buffered after that renewal reconciles on the current lease and extends
// it; revoked by a new session, it closes, and progress buffered after the
// close is WORK_LEASE_EXPIRED.
func TestReconcileFollowsTheLeaseRecord(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	k.clk.Advance(10 * time.Second)
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch,
		LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	w = k.item("wi-1")
	disc := k.clk.Now().Add(5 * time.Second)
	live := k.buffered(w, disc, 10*time.Second, protocol.Usage{Tokens: 3})
	late := k.buffered(w, disc, 60*time.Second, protocol.Usage{Tokens: 3}) // after the revocation below
	k.clk.Advance(20 * time.Second)
	expires := w.Lease.ExpiresAt
	if _, err := k.submitRaw(live); err != nil {
		t.Fatalf("progress buffered after a live renewal: %v", err)
	}
	if got := k.item("wi-1").Lease; got == nil || !got.ExpiresAt.After(expires.Time) {
		t.Fatalf("the reconciled renewal did not extend the current lease: %+v (expired at %s)", got, expires)
	}
	k.clk.Advance(20 * time.Second)
	if err := k.w["w1"].OpenSession(context.Background()); err != nil { // revokes the lease now
		t.Fatal(err)
	}
	k.clk.Advance(30 * time.Second)
	if _, err := k.submitRaw(k.rebuildForCurrentSession(late)); protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("progress buffered after the lease was revoked: %v, want WORK_LEASE_EXPIRED", err)
	}
}

// The offline grace the authority is configured with bounds
// reconciliation (spec 11.5), not the default one: progress buffered 20 s
// past the lease reconciles under a 30 s grace, progress buffered 40 s
// past it is WORK_LEASE_EXPIRED although the default grace would take it.
func TestReconcileWithinTheConfiguredGrace(t *testing.T) {
	k := newSvc(t)
	k.s.cfg.OfflineGrace = 30 * time.Second
	w := k.toActive("wi-1")
	exp := w.Lease.ExpiresAt.Time
	disc := exp.Add(-10 * time.Second)
	within := k.buffered(w, disc, 30*time.Second, protocol.Usage{Tokens: 1})
	past := k.buffered(w, disc, 50*time.Second, protocol.Usage{Tokens: 1})
	k.clk.Advance(exp.Sub(k.clk.Now()) + 45*time.Second)
	if _, err := k.submitRaw(k.rebuildForCurrentSession(within)); err != nil {
		t.Fatalf("buffered 20 s past the lease, grace 30 s: %v", err)
	}
	if _, err := k.submitRaw(k.rebuildForCurrentSession(past)); protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("buffered 40 s past the lease, grace 30 s: %v, want WORK_LEASE_EXPIRED", err)
	}
}
