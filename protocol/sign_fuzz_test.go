package protocol

import (
	"crypto/ed25519"
	"testing"
	"time"
)

// FuzzVerify: Verify and VerifyFresh never panic, fail only with
// AUTH_INVALID_SIGNATURE, and accept nothing but documents signed by the
// test key (the seed corpus holds one).
func FuzzVerify(f *testing.F) {
	k, signed := signedCommandText(f)
	keys := KeySet{k.KeyID: k.Public().Key, "agent:short#k": ed25519.PublicKey{1, 2, 3}}
	for _, s := range []string{
		string(signed), testCommand, `{}`, `[]`, `null`, `{"signature":null}`, `{"signature":[]}`,
		`{"signature":{"alg":"Ed25519","keyId":"agent:short#k","createdAt":"2026-11-30T08:00:00Z","value":"` +
			b64.EncodeToString(make([]byte, 64)) + `"}}`,
		`{"issuedAt":7,"signature":{"alg":"Ed25519","keyId":"agent:worker-1#k1","createdAt":"2026-11-30T08:00:00Z","value":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, DecodeOptions{MaxDepth: 32})
		if err != nil {
			return
		}
		doc, _ := v.(map[string]any)
		errV := Verify(doc, keys)
		if errV != nil && CodeOf(errV) != CodeAuthInvalidSignature {
			t.Fatalf("Verify: %v", errV)
		}
		if errV == nil {
			// Only a signature by the real key can pass.
			in, _ := SigningInput(doc)
			raw, _ := b64.DecodeString(doc["signature"].(map[string]any)["value"].(string))
			if !ed25519.Verify(k.Public().Key, in, raw) {
				t.Fatalf("accepted a document the key did not sign: %s", data)
			}
		}
		errF := VerifyFresh(doc, keys, testNow, DefaultMaxSkew)
		if errF != nil && CodeOf(errF) != CodeAuthInvalidSignature {
			t.Fatalf("VerifyFresh: %v", errF)
		}
		if errV != nil && errF == nil {
			t.Fatal("VerifyFresh accepted what Verify refused")
		}
		_ = CheckCommandSigner(doc)
	})
}

// benchCommand is testCommand signed, parsed once as a receiver would.
func benchCommand(b *testing.B) (map[string]any, PrivateKey) {
	k, signed := signedCommandText(b)
	if n := len(signed); n < 900 || n > 1300 {
		b.Fatalf("signed command is %d bytes, want about 1 KiB", n)
	}
	v, err := Parse(signed, DecodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return v.(map[string]any), k
}

// BenchmarkVerifyCommand is Verify of a parsed ~1 KiB Command: checks,
// signing input and Ed25519. Compare with BenchmarkEd25519VerifyAlone, the
// floor; the difference is what this package adds.
func BenchmarkVerifyCommand(b *testing.B) {
	doc, k := benchCommand(b)
	keys := NewKeySet(k.Public())
	now, _ := time.Parse(time.RFC3339, doc["issuedAt"].(string))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := VerifyFresh(doc, keys, now, DefaultMaxSkew); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519VerifyAlone verifies the same signature over the same
// signing input, computed once.
func BenchmarkEd25519VerifyAlone(b *testing.B) {
	doc, k := benchCommand(b)
	in, err := SigningInput(doc)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := b64.DecodeString(doc["signature"].(map[string]any)["value"].(string))
	if err != nil {
		b.Fatal(err)
	}
	pub := k.Public().Key
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !ed25519.Verify(pub, in, raw) {
			b.Fatal("verify failed")
		}
	}
}

// BenchmarkSigningInput is the part of Verify that is not Ed25519: the
// signing input of the same Command. It is steadier than the difference of
// the two benchmarks above on a busy machine.
func BenchmarkSigningInput(b *testing.B) {
	doc, _ := benchCommand(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := SigningInput(doc); err != nil {
			b.Fatal(err)
		}
	}
}
