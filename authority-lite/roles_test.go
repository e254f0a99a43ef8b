package authoritylite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// joinAs registers an agent whose card declares exactly roles.
func (k *svc) joinAs(id string, roles ...protocol.Role) *Principal {
	k.t.Helper()
	p := k.s.Principal(agent(id), mustKey(k.t, protocol.ActorAgent, id))
	card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id,
		Capabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.2.0"}},
		Roles:        protocol.List[protocol.Role](roles), MaxConcurrency: 1}
	if err := p.Join(context.Background(), card); err != nil {
		k.t.Fatalf("join %s: %v", id, err)
	}
	return p
}

func roles(rs ...protocol.Role) protocol.List[protocol.Role] { return protocol.List[protocol.Role](rs) }

func asError(t *testing.T, err error) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("not a protocol error: %v", err)
	}
	return pe
}

// Agent Card roles bound what an agent may be in a Group: a worker-only
// card is not made coordinator, an observer is not made (or offered work
// as) a worker, and work.offer goes only to members holding the worker
// role.
func TestAgentCardRolesAreEnforced(t *testing.T) {
	k := newSvc(t)
	k.joinAs("only-worker", protocol.RoleWorker)
	k.joinAs("watcher", protocol.RoleObserver)
	k.joinAs("coord-2", protocol.RoleCoordinator)
	k.joinAs("outsider", protocol.RoleWorker)

	// mission.assign_coordinator needs the coordinator role in the card.
	assign := func(id string) *protocol.AssignCoordinatorPayload {
		return &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: id, LeaseDurationMs: uint64(time.Hour.Milliseconds())}
	}
	_, err := k.do(k.alice, protocol.CmdMissionAssignCoordinator, assign("only-worker"))
	if pe := asError(t, err); pe.Code != protocol.CodeAuthForbidden || pe.Pointer != "/payload/agentId" || pe.Details["role"] != "coordinator" {
		t.Fatalf("worker card made coordinator: %+v", pe)
	}
	if m, _ := k.s.Mission("grp-a"); m.Coordinator.AgentID != "coord" {
		t.Fatalf("coordinator changed to %s", m.Coordinator.AgentID)
	}

	// membership.change within the card only.
	k.refuse(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("watcher"), Roles: roles(protocol.RoleWorker)}, protocol.CodeAuthForbidden)
	k.refuse(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("only-worker"), Roles: roles(protocol.RoleWorker, protocol.RoleCoordinator)}, protocol.CodeAuthForbidden)
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("watcher"), Roles: roles(protocol.RoleObserver)})
	k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("only-worker"), Roles: roles(protocol.RoleWorker)})

	// work.offer candidates: members with the worker role.
	c := testContract("wi-r")
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-r", MissionID: "mis-a", Contract: c})
	offer := func(id string, to ...string) error {
		cs := protocol.List[protocol.OfferCandidate]{}
		for _, a := range to {
			cs = append(cs, protocol.OfferCandidate{AgentID: a, SelectionBasis: basis(k.clk.Now())})
		}
		_, err := k.do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-r", OfferID: id, Contract: c,
			Candidates: cs, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
		return err
	}
	if pe := asError(t, offer("off-1", "only-worker", "outsider")); pe.Code != protocol.CodeMembershipRequired || pe.Pointer != "/payload/candidates/1/agentId" {
		t.Fatalf("offer to a non-member: %+v", pe)
	}
	if pe := asError(t, offer("off-2", "watcher")); pe.Code != protocol.CodeAuthForbidden || pe.Pointer != "/payload/candidates/0/agentId" {
		t.Fatalf("offer to an observer: %+v", pe)
	}
	if pe := asError(t, offer("off-3", "ghost")); pe.Code != protocol.CodeMembershipRequired {
		t.Fatalf("offer to an unknown agent: %+v", pe)
	}
	if st := k.item("wi-r").State; st != protocol.WorkOpen {
		t.Fatalf("a refused offer changed the item: %s", st)
	}
	if err := offer("off-4", "only-worker", "w1"); err != nil {
		t.Fatalf("offer to workers: %v", err)
	}

	// A card with the coordinator role may be assigned; it joins as one.
	k.ok(k.alice, protocol.CmdMissionAssignCoordinator, assign("coord-2"))
	if m, _ := k.s.Membership("grp-a", agent("coord-2")); m.State != protocol.MembershipActive {
		t.Fatalf("new coordinator's membership %+v", m)
	}
}

// A command to an existing Group the actor is not a member of gets the
// same answer as one to a Group that does not exist (spec 17.2), whatever
// else is wrong with it; a member keeps the precise answers.
func TestNonMemberLearnsNothing(t *testing.T) {
	k := newSvc(t)
	out := k.join("w9")
	post := &protocol.PostMessagePayload{MessageID: "x", ConversationID: "c", Text: "hi"}
	answer := func(p *Principal, groupID string, edit ...func(*protocol.Envelope)) string {
		_, err := p.Do(context.Background(), protocol.CmdMessagePost, groupID, post, edit...)
		pe := asError(t, err)
		b, _ := json.Marshal(struct {
			Code      protocol.Code
			Message   string
			Retryable bool
			Details   map[string]any
			Pointer   string
		}{pe.Code, strings.ReplaceAll(pe.Message, groupID, "G"), pe.Retryable, pe.Details, pe.Pointer})
		return string(b)
	}
	staleSession := func(e *protocol.Envelope) { e.SessionEpoch = protocol.Uint64(*e.SessionEpoch + 5) }
	staleMembership := func(e *protocol.Envelope) { e.MembershipEpoch = protocol.Uint64(7) }
	missing := answer(out, "grp-none")
	if !strings.Contains(missing, string(protocol.CodeGroupNotFound)) {
		t.Fatalf("unknown group: %s", missing)
	}
	for name, got := range map[string]string{
		"non-member":                     answer(out, "grp-a"),
		"non-member, stale session":      answer(out, "grp-a", staleSession),
		"non-member, made-up membership": answer(out, "grp-a", staleMembership),
		"unknown group, stale session":   answer(out, "grp-none", staleSession),
	} {
		if got != missing {
			t.Errorf("%s: %s, want the unknown group's %s", name, got, missing)
		}
	}
	// A member still gets the precise codes.
	k.refuse(k.w["w1"], protocol.CmdMessagePost, post, protocol.CodeAuthStaleSession, staleSession)
	k.refuse(k.w["w1"], protocol.CmdMessagePost, post, protocol.CodeMembershipStale, staleMembership)
}

// HELLO answers an unknown agent, a key that is not the agent's, an
// unregistered key, a stale proof and a proof naming another session
// epoch than the frame in the same words.
func TestHelloRefusalsAreIdentical(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	epoch := k.s.org.agent("w1").SessionEpoch
	helloProving := func(agentID string, key protocol.PrivateKey, issued time.Time, proofEpoch uint64) *protocol.Error {
		var nb [8]byte
		_, _ = rand.Read(nb[:])
		proof := protocol.HelloProof{AgentID: agentID, SessionEpoch: proofEpoch, Nonce: hex.EncodeToString(nb[:]), IssuedAt: protocol.NewTime(issued)}
		proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: proof.IssuedAt}
		raw, err := protocol.SignedValue(proof, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &proof)
		_, err = k.s.Hello(ctx, &protocol.Hello{AgentID: agentID, SessionEpoch: epoch, Proof: &proof})
		if err == nil {
			return nil
		}
		return asError(t, err)
	}
	hello := func(agentID string, key protocol.PrivateKey, issued time.Time) *protocol.Error {
		return helloProving(agentID, key, issued, epoch)
	}
	now := k.clk.Now()
	if e := hello("w1", k.w["w1"].Key, now); e != nil {
		t.Fatalf("good HELLO: %+v", e)
	}
	ref := hello("ghost", mustKey(t, protocol.ActorAgent, "ghost"), now)
	for name, e := range map[string]*protocol.Error{
		"another agent's key":            hello("w1", k.w["w2"].Key, now),
		"unregistered key":               hello("w1", mustKey(t, protocol.ActorAgent, "w1"), now),
		"stale proof":                    hello("w1", k.w["w1"].Key, now.Add(-time.Hour)),
		"proof of another session epoch": helloProving("w1", k.w["w1"].Key, now, epoch+1),
	} {
		if e == nil || e.Code != ref.Code || e.Message != ref.Message || e.Pointer != ref.Pointer || len(e.Details) != len(ref.Details) {
			t.Errorf("%s: %+v, want the unknown agent's %+v", name, e, ref)
		}
	}
	if ref.Code != protocol.CodeAuthInvalidSignature {
		t.Fatalf("unknown agent: %+v", ref)
	}
}
