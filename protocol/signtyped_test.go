package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"
)

func TestSignedCommandVerifies(t *testing.T) {
	k, err := GenerateKey(KeyIDFor(ActorAgent, "w1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	cmd := &Command{ActionID: "act-1", ProtocolVersion: Version, Actor: Actor{Kind: ActorAgent, ID: "w1"},
		Type: CmdWorkStart, GroupID: "g1", SessionEpoch: Uint64(1), MembershipEpoch: Uint64(1),
		CorrelationID: "m1", IssuedAt: NewTime(now), Payload: json.RawMessage(`{"workItemId":"wi-1","ownershipEpoch":1}`)}
	raw, err := SignedCommand(cmd, k)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(raw, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(doc.(map[string]any), NewKeySet(k.Public())); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if cmd.Signature.Value == "" {
		t.Fatal("signature not stored back on the command")
	}
	again, err := Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Fatalf("re-marshalled command differs from the signed bytes:\n%s\n%s", again, raw)
	}
	// A changed payload no longer verifies.
	tampered := bytes.Replace(raw, []byte(`"wi-1"`), []byte(`"wi-2"`), 1)
	doc, _ = Parse(tampered, DecodeOptions{})
	if err := Verify(doc.(map[string]any), NewKeySet(k.Public())); err == nil {
		t.Fatal("tampered command verified")
	}
}

// A signed card verifies with its own key (createdAt = issuedAt), and the
// signature does not survive a change of what the card claims.
func TestSignedCardVerifies(t *testing.T) {
	k := testKey(t, KeyIDFor(ActorAgent, "w1", "k1"), 7)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	card := AgentCard{AgentID: "w1", AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "w1",
		Keys: List[PublicKey]{k.Public().Encode()}, Capabilities: List[Capability]{{ID: "code.patch", Version: "1.0.0"}},
		Roles: List[Role]{RoleWorker}, MaxConcurrency: 2, IssuedAt: NewTime(now)}
	signed, err := SignedCard(card, k)
	if err != nil {
		t.Fatal(err)
	}
	if signed.Signature.Value == "" || signed.Signature.KeyID != k.KeyID || signed.Signature.CreatedAt != card.IssuedAt {
		t.Fatalf("signature %+v", signed.Signature)
	}
	check := func(c AgentCard) error {
		raw, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Parse(raw, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return Verify(doc.(map[string]any), NewKeySet(k.Public()))
	}
	if err := check(signed); err != nil {
		t.Fatalf("verify: %v", err)
	}
	signed.MaxConcurrency = 3
	if err := check(signed); err == nil {
		t.Fatal("a card with a changed maxConcurrency verified")
	}
}
