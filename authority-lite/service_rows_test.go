package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Positive and negative tests of the command types the service layer
// decides itself (membership, delegation, messages, Organization
// bootstrap, HELLO, archive). The Mission and WorkItem rows are in
// docs/coverage-10.2.md.

func TestMembershipRows(t *testing.T) {
	k := newSvc(t)
	w3 := k.join("w3")
	// A worker may not change membership; the coordinator may.
	k.refuse(k.w["w1"], protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}, protocol.CodeInvalidCommand)
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	m1, _ := k.s.Membership("grp-a", agent("w3"))
	// The missionOwner role cannot be given away.
	k.refuse(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleMissionOwner}}, protocol.CodeAuthForbidden)
	// A role change moves the epoch: commands signed under the old one are fenced.
	_, stale, _ := w3.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "s", ConversationID: "c", Text: "x"})
	k.ok(k.alice, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleCoordinator}})
	if m2, _ := k.s.Membership("grp-a", agent("w3")); m2.MembershipEpoch != m1.MembershipEpoch+1 {
		t.Fatalf("epoch %d after change, want %d", m2.MembershipEpoch, m1.MembershipEpoch+1)
	}
	if _, err := k.s.Submit(context.Background(), "", stale); protocol.CodeOf(err) != protocol.CodeMembershipStale {
		t.Fatalf("old epoch: %v", err)
	}
	// A member may leave; afterwards it is no member at all, and is told
	// nothing of the Group (spec 17.2).
	k.ok(w3, protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: agent("w3"), Reason: "done"})
	k.refuse(w3, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "x"}, protocol.CodeGroupNotFound)
	k.refuse(k.coord, protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: owner}, protocol.CodeAuthForbidden)
	if err := k.s.Authorize("w3", "grp-a"); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("ended member reads the Group: %v", err)
	}
}

func TestDelegationRows(t *testing.T) {
	k := newSvc(t)
	grant := func(id, parent string, to protocol.Actor, exp time.Duration) *protocol.GrantDelegationPayload {
		return &protocol.GrantDelegationPayload{DelegationID: id, Delegate: to, CommandTypes: protocol.List[string]{string(protocol.CmdWorkAuthorize)},
			ExpiresAt: protocol.NewTime(k.clk.Now().Add(exp)), ParentDelegationID: parent}
	}
	k.ok(k.coord, protocol.CmdMembershipGrantDelegation, grant("d1", "", agent("w1"), time.Hour))
	// The delegate authorizes on the coordinator's epoch.
	c := testContract("wi-d")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	m, _ := k.s.Mission("grp-a")
	k.ok(k.w["w1"], protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-d", MissionID: "mis-a", Contract: c},
		func(e *protocol.Envelope) { e.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch) })
	// Not delegated for other types.
	k.refuse(k.w["w1"], protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-d", Reason: "x"}, protocol.CodeAuthForbidden,
		func(e *protocol.Envelope) { e.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch) })
	// Cycles, self-delegation, expiry in the past, depth.
	k.refuse(k.coord, protocol.CmdMembershipGrantDelegation, grant("d2", "", agent("coord"), time.Hour), protocol.CodeInvalidCommand)
	k.refuse(k.coord, protocol.CmdMembershipGrantDelegation, grant("d3", "d1", agent("w1"), time.Hour), protocol.CodeInvalidCommand)
	k.refuse(k.coord, protocol.CmdMembershipGrantDelegation, grant("d4", "", agent("w2"), -time.Minute), protocol.CodeInvalidCommand)
	k.ok(k.coord, protocol.CmdMembershipGrantDelegation, grant("d5", "d1", agent("w2"), time.Hour))
	k.refuse(k.coord, protocol.CmdMembershipGrantDelegation, grant("d6", "d5", agent("w1"), time.Hour), protocol.CodeInvalidCommand) // back to w1: cyclic
	k.join("w3")
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w3"), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	k.ok(k.coord, protocol.CmdMembershipGrantDelegation, grant("d7", "d5", agent("w3"), time.Hour)) // depth 3
	// Depth 4 is over the policy (AUTH_FORBIDDEN naming maxDelegationDepth);
	// the owner's grant for exactly this command lets it through once.
	k.refuse(k.coord, protocol.CmdMembershipGrantDelegation, grant("d8", "d7", owner, time.Hour), protocol.CodeAuthForbidden)
	_, err := k.do(k.coord, protocol.CmdMembershipGrantDelegation, grant("d8", "d7", owner, time.Hour))
	if group.PolicyOf(err) != PolicyDelegationDepth {
		t.Fatalf("depth 4: %v, want the maxDelegationDepth policy named", err)
	}
	k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &protocol.CooperationOverrideGrant{GrantID: "ovr-depth", MissionID: "mis-a", GroupID: "grp-a",
		Policy: PolicyDelegationDepth, Grantee: agent("coord"), TargetCommandType: protocol.CmdMembershipGrantDelegation, TargetActionID: "act-d8",
		Reason: "one more hand-off", Approver: owner, GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))})
	k.ok(k.coord, protocol.CmdMembershipGrantDelegation, grant("d8", "d7", owner, time.Hour),
		func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = "act-d8", "ovr-depth" })
	// Only the coordinator grants.
	k.refuse(k.w["w1"], protocol.CmdMembershipGrantDelegation, grant("d9", "", agent("w2"), time.Hour), protocol.CodeAuthForbidden,
		func(e *protocol.Envelope) { e.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch) })
	// An expired delegation is not honoured.
	k.clk.Advance(2 * time.Hour)
	c2 := testContract("wi-e")
	c2.RetryPolicy.AttemptTimeoutMs, c2.RetryPolicy.CostLimit = 600000, 5
	k.refuse(k.w["w1"], protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-e", MissionID: "mis-a", Contract: c2}, protocol.CodeAuthForbidden,
		func(e *protocol.Envelope) { e.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch) })
}

func TestMessageRows(t *testing.T) {
	k := newSvc(t)
	k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	k.refuse(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "again"}, protocol.CodeInvalidCommand)
	k.refuse(k.w["w2"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m1", Text: "mine now"}, protocol.CodeAuthForbidden)
	k.ok(k.w["w1"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m1", Text: "hello, world"})
	k.refuse(k.w["w1"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "nope", Text: "x"}, protocol.CodeInvalidCommand)
	k.ok(k.w["w1"], protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: "m1", Reason: "wrong thread"})
	k.refuse(k.w["w1"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m1", Text: "x"}, protocol.CodeInvalidStateTransition)
	k.ok(k.w["w2"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m2", ConversationID: "c", Text: "secret"})
	k.refuse(k.w["w1"], protocol.CmdMessageRedact, &protocol.RedactMessagePayload{MessageID: "m2", Reason: "x"}, protocol.CodeAuthForbidden)
	k.ok(k.alice, protocol.CmdMessageRedact, &protocol.RedactMessagePayload{MessageID: "m2", Reason: "leaked a credential"})
	// Revisions per message aggregate survive a reopen (index rebuilt from the log).
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	k.w["w1"].s = k.s
	k.refuse(k.w["w1"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m1", Text: "x"}, protocol.CodeInvalidStateTransition)
	checkLog(t, k.s, "grp-a")
}

func TestOrganizationRows(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	// A card registered by another agent's key, or naming someone else.
	w4 := k.s.Principal(agent("w4"), mustKey(t, protocol.ActorAgent, "w4"))
	card := protocol.AgentCard{AgentID: "w5", AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "x", Keys: protocol.List[protocol.PublicKey]{w4.Key.Public().Encode()},
		Capabilities: protocol.List[protocol.Capability]{{ID: "x", Version: "1.0.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1, IssuedAt: protocol.NewTime(k.clk.Now())}
	signed, err := protocol.SignedCard(card, w4.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w4.Do(ctx, protocol.CmdAgentCardRegister, "", &protocol.RegisterAgentCardPayload{AgentCard: signed}); err == nil {
		t.Fatal("registered another agent's card")
	}
	// session_open must be exactly the next epoch and name the registered card.
	w1 := k.w["w1"]
	a := k.s.org.agent("w1")
	for _, tc := range []struct {
		epoch uint64
		hash  string
		code  protocol.Code
	}{{a.SessionEpoch, a.CardHash, protocol.CodeAuthStaleSession}, {a.SessionEpoch + 2, a.CardHash, protocol.CodeAuthStaleSession}, {a.SessionEpoch + 1, protocol.Digest([]byte("x")), protocol.CodeInvalidCommand}} {
		_, err := w1.Do(ctx, protocol.CmdSessionOpen, "", &protocol.OpenSessionPayload{AgentID: "w1", SessionEpoch: tc.epoch, AgentCardHash: tc.hash})
		if protocol.CodeOf(err) != tc.code {
			t.Fatalf("session_open %d: %v, want %s", tc.epoch, err, tc.code)
		}
	}
	// HELLO: a good proof, then the same nonce again, then a stale epoch.
	hello := func(epoch uint64, nonce string, key protocol.PrivateKey) error {
		proof := protocol.HelloProof{AgentID: "w1", SessionEpoch: epoch, Nonce: nonce, IssuedAt: protocol.NewTime(k.clk.Now())}
		proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: proof.IssuedAt}
		raw, err := protocol.SignedValue(proof, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &proof)
		_, err = k.s.Hello(ctx, &protocol.Hello{AgentID: "w1", SessionEpoch: epoch, Proof: &proof})
		return err
	}
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	if err := hello(a.SessionEpoch, nonce, w1.Key); err != nil {
		t.Fatalf("good HELLO: %v", err)
	}
	if err := hello(a.SessionEpoch, nonce, w1.Key); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("reused nonce: %v", err)
	}
	if err := hello(a.SessionEpoch-1, nonce+"2", w1.Key); protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
		t.Fatalf("stale session: %v", err)
	}
	if err := hello(a.SessionEpoch, nonce+"3", w4.Key); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("someone else's key: %v", err)
	}
}

func TestGroupArchive(t *testing.T) {
	k := newSvc(t)
	pk := mustKey(t, protocol.ActorService, "org-policy")
	if err := k.s.AddPrincipal(protocol.ActorService, "org-policy", pk.Public()); err != nil {
		t.Fatal(err)
	}
	policy := k.s.Principal(orgPolicy, pk)
	archive := func() error {
		snap, err := k.s.SnapshotDocument("grp-a")
		if err != nil {
			return err
		}
		_, err = k.do(policy, protocol.CmdGroupArchive, &protocol.ArchiveGroupPayload{Snapshot: snap, Reason: "mission closed"})
		return err
	}
	if err := archive(); protocol.CodeOf(err) != protocol.CodeInvalidStateTransition {
		t.Fatalf("archive of an active Mission: %v", err)
	}
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "no longer needed"})
	// A snapshot that is not at the current sequence is refused.
	old, err := k.s.SnapshotDocument("grp-a")
	if err != nil {
		t.Fatal(err)
	}
	k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "late", ConversationID: "c", Text: "x"})
	k.refuse(policy, protocol.CmdGroupArchive, &protocol.ArchiveGroupPayload{Snapshot: old}, protocol.CodeRevisionConflict)
	// A tampered snapshot is refused.
	bad, _ := k.s.SnapshotDocument("grp-a")
	bad.Mission.Title = "rewritten"
	k.refuse(policy, protocol.CmdGroupArchive, &protocol.ArchiveGroupPayload{Snapshot: bad}, protocol.CodeAuthInvalidSignature)
	if err := archive(); err != nil {
		t.Fatalf("archive: %v", err)
	}
	k.refuse(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "after", ConversationID: "c", Text: "x"}, protocol.CodeInvalidStateTransition)
	evs := checkLog(t, k.s, "grp-a")
	if n := len(evs); evs[n-2].Type != protocol.EvtGroupSnapshotCreated || evs[n-1].Type != protocol.EvtGroupArchived {
		t.Fatalf("last events %s, %s", evs[n-2].Type, evs[n-1].Type)
	}
	// Durable.
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	k.alice.s = k.s
	k.refuse(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "after2", ConversationID: "c", Text: "x"}, protocol.CodeInvalidStateTransition)
}

func TestCapabilityTokenBoundToLease(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	keys := protocol.NewKeySet(k.s.PublicKey())
	var tokens []protocol.CapabilityToken
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type != protocol.EvtWorkStarted && ev.Type != protocol.EvtWorkProgressed {
			continue
		}
		v, err := group.Decode(ev.Type, ev.Payload)
		tok, lease := group.CapabilityTokenOf(v), group.LeaseOf(v)
		if err != nil || tok == nil {
			t.Fatalf("%s without a capability token: %v", ev.Type, err)
		}
		if err := protocol.CheckCapabilityToken(tok, keys, w.Lease.LeaseID, k.clk.Now()); err != nil {
			t.Fatalf("token: %v", err)
		}
		if tok.ExpiresAt.After(lease.ExpiresAt.Time) || tok.AgentID != "w1" {
			t.Fatalf("token outlives its lease or names %s", tok.AgentID)
		}
		tokens = append(tokens, *tok)
	}
	if len(tokens) != 2 {
		t.Fatalf("%d tokens, want one at start and one at renewal", len(tokens))
	}
	// Bound to the lease: refused for another lease id, and after expiry.
	if err := protocol.CheckCapabilityToken(&tokens[0], keys, "lease-other", k.clk.Now()); protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("other lease: %v", err)
	}
	if err := protocol.CheckCapabilityToken(&tokens[1], keys, "", tokens[1].ExpiresAt.Time); protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("at expiry: %v", err)
	}
	forged := tokens[1]
	forged.AllowedTools = append(forged.AllowedTools, "rm")
	if err := protocol.CheckCapabilityToken(&forged, keys, "", k.clk.Now()); err == nil {
		t.Fatal("widened token verified")
	}
}

// TestArtifactRepublishIsANewRevision: the same content published again
// (another lease of the item) is the artifact's next revision.
func TestArtifactRepublishIsANewRevision(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	d1 := k.publish("w1", w, []byte("same bytes"))
	d2 := k.publish("w1", w, []byte("same bytes"))
	if d1 != d2 {
		t.Fatal("content hashes differ")
	}
	var revs []uint64
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type == protocol.EvtArtifactPublished {
			revs = append(revs, ev.Rev())
		}
	}
	if len(revs) != 2 || revs[0] != 1 || revs[1] != 2 {
		t.Fatalf("artifact revisions %v, want [1 2]", revs)
	}
}
