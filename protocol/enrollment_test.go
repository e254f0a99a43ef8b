package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// An enrollment document is fresh until its validUntil; without the
// extension, or on another command type, the clock skew applies.
func TestEnrollmentValidity(t *testing.T) {
	k := testKey(t, "agent:w2#k1", 3)
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	card, err := SignedCard(AgentCard{AgentID: "w2", AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "w2",
		Keys: List[PublicKey]{k.Public().Encode()}, Capabilities: List[Capability]{{ID: "demo.steps", Version: "1.0.0"}}, Roles: List[Role]{RoleWorker}, MaxConcurrency: 1, IssuedAt: NewTime(at)}, k)
	if err != nil {
		t.Fatal(err)
	}
	ext := func(valid time.Duration) Extensions {
		data, _ := json.Marshal(EnrollmentValidity{ValidUntil: NewTime(at.Add(valid))})
		return Extensions{EnrollmentExtensionURI: {Critical: true, Data: data}}
	}
	actor := Actor{Kind: ActorAgent, ID: "w2"}
	register := func(exts Extensions) []byte {
		_, raw, err := BuildCommand(actor, k, CmdAgentCardRegister, Envelope{Extensions: exts}, &RegisterAgentCardPayload{AgentCard: card}, at)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	ptr := "/extensions/" + EnrollmentExtensionURI + "/data/validUntil"
	tests := []struct {
		name    string
		raw     []byte
		now     time.Time
		want    Code
		pointer string
		reason  string
	}{
		{name: "no extension, within the skew", raw: register(nil), now: at.Add(time.Minute)},
		{name: "no extension, past the skew", raw: register(nil), now: at.Add(3 * time.Minute), want: CodeAuthInvalidSignature, pointer: "/issuedAt"},
		{name: "valid an hour, at 59 minutes", raw: register(ext(time.Hour)), now: at.Add(59 * time.Minute)},
		{name: "valid an hour, at its validUntil", raw: register(ext(time.Hour)), now: at.Add(time.Hour)},
		{name: "valid an hour, after it", raw: register(ext(time.Hour)), now: at.Add(time.Hour + time.Millisecond),
			want: CodeAuthInvalidSignature, pointer: ptr, reason: "enrollment_expired"},
		{name: "valid the maximum", raw: register(ext(MaxEnrollmentValidity)), now: at.Add(MaxEnrollmentValidity)},
		{name: "valid longer than the maximum", raw: register(ext(MaxEnrollmentValidity + time.Millisecond)), now: at,
			want: CodeInvalidCommand, pointer: ptr},
		{name: "validUntil before issuedAt", raw: register(ext(-time.Second)), now: at, want: CodeInvalidCommand, pointer: ptr},
		{name: "issued in the future", raw: register(ext(time.Hour)), now: at.Add(-3 * time.Minute), want: CodeAuthInvalidSignature, pointer: "/issuedAt"},
		{name: "tampered validUntil", raw: replaceOnce(register(ext(time.Hour)), `T09:00:00`, `T10:00:00`), now: at,
			want: CodeAuthInvalidSignature, pointer: "/signature/value"},
	}
	// The extension on another command type gives no extra time.
	_, other, err := BuildCommand(actor, k, CmdSessionOpen, Envelope{Extensions: ext(time.Hour)},
		&OpenSessionPayload{AgentID: "w2", SessionEpoch: 1, AgentCardHash: Digest([]byte("card"))}, at)
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name    string
		raw     []byte
		now     time.Time
		want    Code
		pointer string
		reason  string
	}{name: "on session_open", raw: other, now: at.Add(30 * time.Minute), want: CodeAuthInvalidSignature, pointer: "/issuedAt"})
	in := Inbound{Keys: NewKeySet(k.Public())}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := in.DecodeCommand(tc.raw, tc.now)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Code != tc.want || e.Pointer != tc.pointer {
				t.Fatalf("got %v, want %s at %s", err, tc.want, tc.pointer)
			}
			if tc.reason != "" && e.Details["reason"] != tc.reason {
				t.Fatalf("details %v, want reason %s", e.Details, tc.reason)
			}
		})
	}
	if _, err := EnrollmentExtension(at, MaxEnrollmentValidity+time.Second); err == nil {
		t.Fatal("EnrollmentExtension accepted a validity over the maximum")
	}
}
