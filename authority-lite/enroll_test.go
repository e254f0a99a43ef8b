package authoritylite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A Group holds one Mission: mission.create into an existing Group is
// refused, saying so, and changes nothing.
func TestServiceOneMissionPerGroup(t *testing.T) {
	k := newSvc(t)
	before := k.s.LastSequence("grp-a")
	_, err := k.do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-2", Title: "Another", Objective: "same group", PriorityClass: protocol.PriorityNormal})
	pe := asError(t, err)
	if pe.Code != protocol.CodeInvalidStateTransition || pe.Pointer != "/groupId" || pe.Details["reason"] != "group_exists" {
		t.Fatalf("second mission.create in grp-a: %v", err)
	}
	if k.s.LastSequence("grp-a") != before {
		t.Fatal("the refused mission.create appended events")
	}
}

// The Organization's registration: a policy service registers an agent's
// card (closed registration or not); anyone else's is refused, and so is
// a registration that does not carry the enrollment's card.
func TestServiceEnroll(t *testing.T) {
	k := newSvc(t)
	pk := mustKey(t, protocol.ActorService, "org-policy")
	if err := k.s.AddPrincipal(protocol.ActorService, "org-policy", pk.Public()); err != nil {
		t.Fatal(err)
	}
	wk := mustKey(t, protocol.ActorAgent, "w9")
	now := k.clk.Now()
	card := func(version string) protocol.AgentCard {
		c, err := protocol.SignedCard(protocol.AgentCard{AgentID: "w9", AgentVersion: version, OrganizationID: "org-1", DisplayName: "w9",
			Keys: protocol.List[protocol.PublicKey]{wk.Public().Encode()}, Capabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.2.0"}},
			Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1, IssuedAt: protocol.NewTime(now)}, wk)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	build := func(actor protocol.Actor, key protocol.PrivateKey, c protocol.AgentCard, exts protocol.Extensions) []byte {
		_, raw, err := protocol.BuildCommand(actor, key, protocol.CmdAgentCardRegister, protocol.Envelope{Extensions: exts}, &protocol.RegisterAgentCardPayload{AgentCard: c}, k.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	policy := protocol.Actor{Kind: protocol.ActorService, ID: "org-policy"}
	ext, err := protocol.EnrollmentExtension(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	enrollment := build(protocol.Actor{Kind: protocol.ActorAgent, ID: "w9"}, wk, card("1.0.0"), ext)

	// Not a registered policy service.
	other := mustKey(t, protocol.ActorService, "stranger")
	if _, err := k.s.Enroll(context.Background(), build(protocol.Actor{Kind: protocol.ActorService, ID: "stranger"}, other, card("1.0.0"), nil), nil); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("registration by an unknown service: %v", err)
	}
	// Another card than the enrollment's.
	if _, err := k.s.Enroll(context.Background(), build(policy, pk, card("2.0.0"), nil), enrollment); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("registration of another card: %v", err)
	}
	// The enrollment past its validity.
	k.clk.Advance(time.Hour + time.Second)
	if _, err := k.s.Enroll(context.Background(), build(policy, pk, card("1.0.0"), nil), enrollment); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("expired enrollment: %v", err)
	}
	if _, ok := k.s.AgentCard("w9"); ok {
		t.Fatal("a refused registration registered the card")
	}
	// A card on its own, registered by the policy service.
	e, err := k.s.Enroll(context.Background(), build(policy, pk, card("1.0.0"), nil), nil)
	if err != nil || e.AgentID != "w9" || e.AgentCardHash != cardDigest(card("1.0.0")) || e.EventID == "" {
		t.Fatalf("enroll: %+v %v", e, err)
	}
	if c, ok := k.s.AgentCard("w9"); !ok || c.AgentVersion != "1.0.0" {
		t.Fatalf("card after enroll: %+v %v", c, ok)
	}
}

// MemberGroups follows memberships, and MembershipChanged wakes on each.
func TestServiceMemberGroups(t *testing.T) {
	k := newSvc(t)
	if g := k.s.MemberGroups("w1"); !slices.Equal(g, []string{"grp-a"}) {
		t.Fatalf("w1's groups %v", g)
	}
	changed := k.s.MembershipChanged()
	k.ok(k.coord, protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: agent("w2")})
	select {
	case <-changed:
	default:
		t.Fatal("membership.end did not wake MembershipChanged")
	}
	if g := k.s.MemberGroups("w2"); len(g) != 0 {
		t.Fatalf("w2's groups after its membership ended: %v", g)
	}
	changed = k.s.MembershipChanged()
	k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "msg-1", ConversationID: "c-1", Text: "hi"})
	select {
	case <-changed:
		t.Fatal("a message woke MembershipChanged")
	default:
	}
}
