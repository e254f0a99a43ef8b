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
