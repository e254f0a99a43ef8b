package protocol

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"
)

// FuzzDecodeRequestProof: any header value decodes to a proof whose
// members are in their forms, or to PROTOCOL_VIOLATION; never a panic. A
// decoded proof re-encodes to a value that decodes the same.
func FuzzDecodeRequestProof(f *testing.F) {
	k, err := GenerateKey(KeyIDFor(ActorHuman, "alice", "k1"), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	good, err := SignRequest(Actor{Kind: ActorHuman, ID: "alice"}, k, "GET", "/mwp/session", "0123456789abcdef0123", time.Unix(1e9, 0))
	if err != nil {
		f.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{good, "", "%%", "e30", b64([]byte(`{"actor":{"kind":"human","id":"a"},"actor":{}}`)),
		b64([]byte(`{"actor":{"kind":"human","id":"a"},"method":"GET","target":"/x","nonce":"0123456789abcdef","issuedAt":"2026-01-01T00:00:00Z","signature":{"alg":"Ed25519","keyId":"human:a#k1","createdAt":"2026-01-01T00:00:00Z","value":"x"},"extra":1}`)),
		b64([]byte(`[1,2]`)), b64([]byte("\xef\xbb\xbf{}"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		p, doc, err := DecodeRequestProof(header)
		if err != nil {
			if CodeOf(err) != CodeProtocolViolation {
				t.Fatalf("refusal %v is not PROTOCOL_VIOLATION", err)
			}
			return
		}
		if doc == nil || !ValidID(p.Actor.ID) || !p.Actor.Kind.Known() || p.Target[0] != '/' || !ValidKeyID(p.Signature.KeyID) {
			t.Fatalf("accepted a proof out of form: %+v", p)
		}
		again, err := EncodeDocumentHeader(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := DecodeRequestProof(again); err != nil {
			t.Fatalf("re-encoded proof refused: %v", err)
		}
	})
}

// FuzzDecodeCapabilityHeader: a capability header decodes or is
// PROTOCOL_VIOLATION; never a panic.
func FuzzDecodeCapabilityHeader(f *testing.F) {
	b64 := base64.RawURLEncoding.EncodeToString
	f.Add(b64([]byte(`{"tokenId":"t","leaseId":"l","agentId":"a","groupId":"g","workItemId":"w","ownershipEpoch":1,"allowedTools":[],"allowedOperations":[],"allowedData":[],"issuedAt":"2026-01-01T00:00:00Z","expiresAt":"2026-01-01T00:02:00Z","signature":{"alg":"Ed25519","keyId":"service:authority-1#k1","createdAt":"2026-01-01T00:00:00Z","value":"x"}}`)))
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := DecodeCapabilityHeader(header)
		if err != nil {
			if CodeOf(err) != CodeProtocolViolation {
				t.Fatalf("refusal %v is not PROTOCOL_VIOLATION", err)
			}
			return
		}
		if tok.TokenID == "" || tok.LeaseID == "" || !ValidKeyID(tok.Signature.KeyID) {
			t.Fatalf("accepted a token out of form: %+v", tok)
		}
	})
}
