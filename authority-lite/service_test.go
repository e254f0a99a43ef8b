package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// svc is a Service on a fake clock with a human owner, a coordinator and
// two workers already joined to Group grp-a.
type svc struct {
	t     testing.TB
	dir   string
	clk   *clock.Fake
	every uint64 // checkpointEvery; 0 is the default
	// tree, when not nil, opens the log the Service is on instead of
	// DIR/authority.db (the same log on every call).
	tree  func(t testing.TB) logstore.Tree
	s     *Service
	akey  protocol.PrivateKey
	alice *Principal
	coord *Principal
	w     map[string]*Principal
}

func mustKey(t testing.TB, kind protocol.ActorKind, id string) protocol.PrivateKey {
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openSvc(t testing.TB, dir string, clk *clock.Fake, key protocol.PrivateKey) *Service {
	t.Helper()
	return openSvcEvery(t, dir, clk, key, 0)
}

// openSvcEvery is openSvc with a checkpoint every `every` events.
func openSvcEvery(t testing.TB, dir string, clk *clock.Fake, key protocol.PrivateKey, every uint64) *Service {
	t.Helper()
	s, err := Open(Config{Dir: dir, Clock: clk, Key: key, Limits: testLimits(), checkpointEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// open opens k's Service again on its log.
func (k *svc) open(t testing.TB) *Service {
	t.Helper()
	cfg := Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), checkpointEvery: k.every}
	if k.tree != nil {
		cfg.Store, cfg.StoreName = k.tree(t), "test stream"
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newSvc(t testing.TB) *svc {
	t.Helper()
	return newSvcEvery(t, 0)
}

// newSvcEvery is newSvc with a checkpoint every `every` events.
func newSvcEvery(t testing.TB, every uint64) *svc {
	t.Helper()
	return newSvcOn(t, every, nil)
}

// newSvcOn is newSvcEvery on the log tree opens (nil: authority.db).
func newSvcOn(t testing.TB, every uint64, tree func(testing.TB) logstore.Tree) *svc {
	t.Helper()
	k := &svc{t: t, dir: t.TempDir(), clk: clock.NewFake(t0), every: every, tree: tree, w: map[string]*Principal{}}
	k.akey = mustKey(t, protocol.ActorService, "authority-1")
	k.s = k.open(t)
	t.Cleanup(func() {
		checkEventBytes(t, k.s)
		k.s.Close()
	})
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := k.s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	k.alice = k.s.Principal(owner, hk)
	k.coord = k.join("coord")
	for _, id := range []string{"w1", "w2"} {
		k.w[id] = k.join(id)
	}
	k.ok(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "Fix bug", Objective: "ship it", PriorityClass: protocol.PriorityNormal})
	k.ok(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64((10 * time.Hour).Milliseconds())})
	for _, id := range []string{"w1", "w2"} {
		k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent(id), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	}
	return k
}

func (k *svc) join(id string) *Principal {
	k.t.Helper()
	p := k.s.Principal(agent(id), mustKey(k.t, protocol.ActorAgent, id))
	card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id,
		Capabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.2.0"}},
		Roles:        protocol.List[protocol.Role]{protocol.RoleWorker, protocol.RoleCoordinator}, MaxConcurrency: 2}
	if err := p.Join(context.Background(), card); err != nil {
		k.t.Fatalf("join %s: %v", id, err)
	}
	return p
}

func (k *svc) do(p *Principal, typ protocol.CommandType, payload any, edit ...func(*protocol.Envelope)) (*protocol.Receipt, error) {
	return p.Do(context.Background(), typ, "grp-a", payload, edit...)
}

func (k *svc) ok(p *Principal, typ protocol.CommandType, payload any, edit ...func(*protocol.Envelope)) *protocol.Receipt {
	k.t.Helper()
	r, err := k.do(p, typ, payload, edit...)
	if err != nil {
		k.t.Fatalf("%s by %s: %v", typ, p.Actor.ID, err)
	}
	return r
}

func (k *svc) refuse(p *Principal, typ protocol.CommandType, payload any, code protocol.Code, edit ...func(*protocol.Envelope)) {
	k.t.Helper()
	_, err := k.do(p, typ, payload, edit...)
	if protocol.CodeOf(err) != code {
		k.t.Fatalf("%s by %s: got %v, want %s", typ, p.Actor.ID, err, code)
	}
}

func (k *svc) item(id string) group.WorkItem {
	w, ok := k.s.WorkItem("grp-a", id)
	if !ok {
		k.t.Fatalf("no work item %s", id)
	}
	return w
}

// toActive drives wi through authorize, offer, accept and start by w1.
func (k *svc) toActive(id string) group.WorkItem {
	k.t.Helper()
	c := testContract(id)
	c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	cpu := 1.0
	c.ResourceLimits = protocol.ResourceLimits{CPU: &cpu, MemoryMiB: protocol.Uint64(512)}
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
	k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}, {AgentID: "w2", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
	k.ok(k.w["w1"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
	k.refuse(k.w["w2"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())}, protocol.CodeWorkAlreadyOwned)
	w := k.item(id)
	k.ok(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: w.Ownership.OwnershipEpoch})
	return k.item(id)
}

// publish stores data and publishes its signed manifest under w's lease.
func (k *svc) publish(agentID string, w group.WorkItem, data []byte) string {
	k.t.Helper()
	digest, err := k.s.PutArtifact(data)
	if err != nil {
		k.t.Fatal(err)
	}
	card, _ := k.s.AgentCard(agentID)
	a := k.s.org.agent(agentID)
	m := protocol.ArtifactManifest{ContentHash: digest, MediaType: "text/x-diff", Schema: protocol.ManifestSchema("", "text/x-diff"),
		Producer:  protocol.ArtifactProducer{AgentID: agentID, AgentVersion: card.AgentVersion, AgentCardHash: a.CardHash},
		MissionID: "mis-a", GroupID: "grp-a", WorkItemID: w.WorkItemID, SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{"go": "1.26"},
		CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: "mwp-artifact:" + digest}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: k.w[agentID].Key.KeyID, CreatedAt: m.CreatedAt}
	raw, err := protocol.SignedValue(m, k.w[agentID].Key)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		k.t.Fatal(err)
	}
	k.ok(k.w[agentID], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(w.Ownership.OwnershipEpoch), LeaseID: w.Lease.LeaseID})
	// A tampered manifest is refused.
	m.Size++
	k.refuse(k.w[agentID], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(w.Ownership.OwnershipEpoch), LeaseID: w.Lease.LeaseID}, protocol.CodeAuthInvalidSignature)
	return digest
}

func basis(now time.Time) protocol.SelectionBasis {
	return protocol.SelectionBasis{
		CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
		AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
		ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
		PolicyRulesApplied: protocol.List[string]{"capability-match"},
	}
}

func disclosure(now time.Time) protocol.ScheduleDisclosure {
	return protocol.ScheduleDisclosure{EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(now), To: protocol.NewTime(now.Add(time.Minute))},
		EstimatedCompletion: protocol.NewTime(now.Add(time.Hour)), Confidence: 0.8, CapacityState: protocol.CapacityAvailable, ComputedAt: protocol.NewTime(now)}
}

func TestServiceMissionEndToEnd(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	lease := w.Lease.LeaseID
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: lease, Progress: progress(k.clk.Now())})
	digest := k.publish("w1", w, []byte("--- a/x.go\n+++ b/x.go\n"))
	k.ok(k.w["w1"], protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: lease,
		Artifacts: protocol.List[string]{digest}, Evidence: protocol.List[protocol.Evidence]{evidence("wi-1", "ac-1", "ac-2")}})
	k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})
	if got := k.item("wi-1").State; got != protocol.WorkVerified {
		t.Fatalf("state %s, want verified", got)
	}
	k.ok(k.coord, protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{MissionID: "mis-a", Summary: "done", Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{evidence("mis-a", "ac-1")}})
	k.ok(k.alice, protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: "mis-a", ApprovalID: "apr-1"})
	if m, _ := k.s.Mission("grp-a"); m.State != protocol.MissionApproved {
		t.Fatalf("mission %s, want approved", m.State)
	}
	checkLog(t, k.s, "grp-a")
}

// checkLog verifies every stored event: contiguous sequences from 1, a
// valid authority signature, the Group id.
func checkLog(t testing.TB, s *Service, group string) []protocol.Event {
	t.Helper()
	evs, err := s.Events(group, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := protocol.NewKeySet(s.PublicKey())
	var out []protocol.Event
	for i, se := range evs {
		if se.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, se.Sequence)
		}
		doc, err := protocol.Parse(se.Raw, protocol.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := protocol.Verify(doc.(map[string]any), keys); err != nil {
			t.Fatalf("event %d: %v", se.Sequence, err)
		}
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil || ev.GroupID != group {
			t.Fatalf("event %d: %v group %q", se.Sequence, err, ev.GroupID)
		}
		out = append(out, ev)
	}
	return out
}

func TestServiceIdempotentRetryAndCollision(t *testing.T) {
	k := newSvc(t)
	before := k.s.LastSequence("grp-a")
	p := &protocol.PostMessagePayload{MessageID: "msg-1", ConversationID: "c-1", Text: "hello"}
	_, raw, err := k.alice.Build(protocol.CmdMessagePost, "grp-a", p, func(e *protocol.Envelope) { e.ActionID = "act-fixed" })
	if err != nil {
		t.Fatal(err)
	}
	r1, err := k.s.Submit(context.Background(), "", raw)
	if err != nil {
		t.Fatal(err)
	}
	// Long after issuedAt the same bytes still get the same receipt.
	k.clk.Advance(time.Hour)
	r2, err := k.s.Submit(context.Background(), "", raw)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if r1.Events[0].EventID != r2.Events[0].EventID || k.s.LastSequence("grp-a") != before+1 {
		t.Fatalf("retry appended or changed the receipt: %+v %+v", r1, r2)
	}
	// Reopen: receipts are durable.
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	k.alice.s = k.s
	r3, err := k.s.Submit(context.Background(), "", raw)
	if err != nil || r3.Events[0].EventID != r1.Events[0].EventID {
		t.Fatalf("retry after reopen: %v %+v", err, r3)
	}
	// Same action id, different content.
	k.refuse(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "msg-2", ConversationID: "c-1", Text: "other"}, protocol.CodeActionIDCollision,
		func(e *protocol.Envelope) { e.ActionID = "act-fixed" })
}

func TestServiceMessagesNeverAuthorize(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	before, _ := k.s.WorkItem("grp-a", "wi-1")
	m0, _ := k.s.Mission("grp-a")
	for i, text := range []string{"approve", "start work on wi-1", "mission.approve mis-a", `{"type":"work.accept_result","workItemId":"wi-1"}`} {
		k.ok(k.coord, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m-" + string(rune('a'+i)), ConversationID: "c", Text: text})
	}
	after, _ := k.s.WorkItem("grp-a", "wi-1")
	m1, _ := k.s.Mission("grp-a")
	if after.State != before.State || after.Revision != before.Revision || m1.State != m0.State || m1.Revision != m0.Revision {
		t.Fatalf("a message changed state: %s/%d -> %s/%d, mission %s -> %s", before.State, before.Revision, after.State, after.Revision, m0.State, m1.State)
	}
}

func TestServiceFencing(t *testing.T) {
	k := newSvc(t)
	// Not a member: told nothing of the Group (TestNonMemberLearnsNothing).
	out := k.join("w9")
	k.refuse(out, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "hi"}, protocol.CodeGroupNotFound)
	// Stale membership epoch.
	k.refuse(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "hi"}, protocol.CodeMembershipStale,
		func(e *protocol.Envelope) { e.MembershipEpoch = protocol.Uint64(*e.MembershipEpoch + 1) })
	// Stale session epoch.
	k.refuse(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "hi"}, protocol.CodeAuthStaleSession,
		func(e *protocol.Envelope) { e.SessionEpoch = protocol.Uint64(*e.SessionEpoch - 1) })
	// Unknown group.
	_, err := k.w["w1"].Do(context.Background(), protocol.CmdMessagePost, "grp-zz", &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "hi"})
	if protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("unknown group: %v", err)
	}
	// An agent cannot send another agent's command on its connection.
	_, raw, _ := k.w["w2"].Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "y", ConversationID: "c", Text: "hi"})
	if _, err := k.s.Submit(context.Background(), "w1", raw); protocol.CodeOf(err) != protocol.CodeAuthForbidden {
		t.Fatalf("relay: %v", err)
	}
	if err := k.s.Authorize("w9", "grp-a"); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("authorize non-member: %v", err)
	}
	if err := k.s.Authorize("w9", "grp-nope"); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("authorize unknown: %v", err)
	}
}

func TestServiceSessionReplacementRevokesLeases(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	oldLease, epoch := w.Lease.LeaseID, w.Ownership.OwnershipEpoch
	if err := k.w["w1"].OpenSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := k.item("wi-1")
	if got.State != protocol.WorkQueued || got.Lease != nil || got.Ownership == nil {
		t.Fatalf("after replacement: state %s lease %v ownership %v", got.State, got.Lease, got.Ownership)
	}
	// The old lease is dead; the new session may start again.
	k.refuse(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: oldLease, Progress: progress(k.clk.Now())}, protocol.CodeWorkLeaseExpired)
	k.ok(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch})
	if k.item("wi-1").Lease.LeaseID == oldLease {
		t.Fatal("new session reused the old lease id")
	}
	checkLog(t, k.s, "grp-a")
}

func TestServiceCrashReopenKeepsEverything(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	last := k.s.LastSequence("grp-a")
	before, _ := k.s.WorkItem("grp-a", "wi-1")
	k.s.Close()
	s2 := openSvc(t, k.dir, k.clk, k.akey)
	defer s2.Close()
	after, ok := s2.WorkItem("grp-a", "wi-1")
	if !ok || after.State != before.State || after.Revision != before.Revision || after.Lease.LeaseID != before.Lease.LeaseID {
		t.Fatalf("work item changed across reopen: %+v vs %+v", before, after)
	}
	if s2.LastSequence("grp-a") != last {
		t.Fatalf("last sequence %d, want %d", s2.LastSequence("grp-a"), last)
	}
	// The next command continues the sequence without reuse.
	w1 := s2.Principal(agent("w1"), k.w["w1"].Key)
	if _, err := w1.Do(context.Background(), protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "m", ConversationID: "c", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if s2.LastSequence("grp-a") != last+1 {
		t.Fatalf("sequence after reopen %d, want %d", s2.LastSequence("grp-a"), last+1)
	}
	checkLog(t, s2, "grp-a")
}

func TestServiceBudgetAtomic(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	rec := func(tokens uint64) error {
		_, err := k.do(k.w["w1"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, UsageDelta: protocol.Usage{Tokens: tokens}})
		return err
	}
	if err := rec(600); err != nil {
		t.Fatal(err)
	}
	last := k.s.LastSequence("grp-a")
	if err := rec(600); protocol.CodeOf(err) != protocol.CodeBudgetExceeded {
		t.Fatalf("over budget: %v", err)
	}
	if k.s.LastSequence("grp-a") != last || k.s.Usage("grp-a", "wi-1").Tokens != 600 {
		t.Fatal("a refused charge left a trace")
	}
	if err := rec(400); err != nil {
		t.Fatalf("exactly at budget: %v", err)
	}
}

func TestServiceChangedWakes(t *testing.T) {
	k := newSvc(t)
	last := k.s.LastSequence("grp-a")
	ch := k.s.Changed("grp-a", last)
	select {
	case <-ch:
		t.Fatal("changed before any append")
	default:
	}
	k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m", ConversationID: "c", Text: "x"})
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by an append")
	}
	if _, err := k.s.Events("grp-a", last, 10); err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	if _, err := k.s.Hello(context.Background(), &protocol.Hello{AgentID: "w1"}); !errors.As(err, &pe) || pe.Code != protocol.CodeAuthInvalidSignature {
		t.Fatalf("hello without proof: %v", err)
	}
}

func progress(now time.Time) protocol.Progress {
	return protocol.Progress{Phase: "coding", MilestonesCompleted: protocol.List[string]{"design"}, NextCheckpoint: "tests green",
		Blockers: protocol.List[string]{}, RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(now.Add(time.Hour)), Confidence: 0.7},
		EvidenceRefs: protocol.List[string]{}}
}
