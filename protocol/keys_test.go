package protocol

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestGenerateKey(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, 32)
	a, err := GenerateKey("agent:w1#k1", bytes.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateKey("agent:w1#k1", bytes.NewReader(seed))
	if !a.Key.Equal(b.Key) || !bytes.Equal(a.Key.Seed(), seed) {
		t.Fatal("GenerateKey is not the key of the seed it read")
	}
	if pub := a.Public(); pub.KeyID != "agent:w1#k1" || !pub.Key.Equal(a.Key.Public()) {
		t.Fatalf("Public() = %+v", pub)
	}
	if pub := (PrivateKey{KeyID: "k", Key: a.Key[:10]}).Public(); pub.Key != nil {
		t.Fatal("Public() of a truncated key")
	}
	if _, err := GenerateKey("", bytes.NewReader(seed)); err == nil {
		t.Fatal("accepted an empty key id")
	}
	if _, err := GenerateKey("k1", bytes.NewReader(seed[:5])); err == nil {
		t.Fatal("accepted a short random source")
	}
	if _, err := GenerateKey("k1", nil); err != nil {
		t.Fatalf("crypto/rand: %v", err)
	}
}

func TestKeyFilesRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys") // created by WriteKeyFiles
	k := testKey(t, "agent:w1#k1", 5)
	privPath, pubPath, err := WriteKeyFiles(dir, "w1", k)
	if err != nil {
		t.Fatal(err)
	}
	if privPath != filepath.Join(dir, "w1.key") || pubPath != filepath.Join(dir, "w1.pub") {
		t.Fatalf("paths %s %s", privPath, pubPath)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{privPath: 0o600, pubPath: 0o644} {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != want {
				t.Errorf("%s mode %04o, want %04o", path, st.Mode().Perm(), want)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if priv.KeyID != k.KeyID || !priv.Key.Equal(k.Key) {
		t.Fatal("private key changed in the round trip")
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if pub.KeyID != k.KeyID || !pub.Key.Equal(k.Key.Public()) {
		t.Fatal("public key changed in the round trip")
	}
	// The public file is exactly the wire PublicKey object.
	data, _ := os.ReadFile(pubPath)
	if want := `{"alg":"Ed25519","keyId":"agent:w1#k1","publicKey":"` + b64.EncodeToString(pub.Key) + "\"}\n"; string(data) != want {
		t.Fatalf("public file %q, want %q", data, want)
	}
	wire := pub.Encode()
	back, err := DecodePublicKey(wire)
	if err != nil || back.KeyID != pub.KeyID || !back.Key.Equal(pub.Key) {
		t.Fatalf("DecodePublicKey(Encode()) = %+v, %v", back, err)
	}
	wire.Alg = "RSA"
	if _, err := DecodePublicKey(wire); CodeOf(err) != CodeSchemaValidationFailed {
		t.Fatalf("DecodePublicKey with alg RSA: %v", err)
	}

	// A second key under the same name must not replace the first.
	other := testKey(t, "agent:w1#k2", 6)
	if _, _, err := WriteKeyFiles(dir, "w1", other); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("overwrote a private key: %v", err)
	}
	again, err := LoadPrivateKey(privPath)
	if err != nil || !again.Key.Equal(k.Key) {
		t.Fatalf("the private key changed: %v", err)
	}
}

func TestWriteKeyFilesRefuses(t *testing.T) {
	k := testKey(t, "agent:w1#k1", 5)
	dir := t.TempDir()
	for _, name := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("n", 65)} {
		if _, _, err := WriteKeyFiles(dir, name, k); err == nil {
			t.Errorf("accepted file name %q", name)
		}
	}
	if _, _, err := WriteKeyFiles(dir, "bad", PrivateKey{KeyID: "k", Key: k.Key[:32]}); err == nil {
		t.Error("wrote a truncated key")
	}
	// A pre-existing private file of any kind is never replaced.
	path := filepath.Join(dir, "taken.key")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteKeyFiles(dir, "taken", k); err == nil {
		t.Fatal("replaced an existing file")
	}
	if data, _ := os.ReadFile(path); string(data) != "precious" {
		t.Fatal("existing file changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "taken.pub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("wrote a public key for a refused private key")
	}
}

func TestLoadPrivateKeyRefusesWideMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits")
	}
	dir := t.TempDir()
	privPath, _, err := WriteKeyFiles(dir, "w1", testKey(t, "k1", 5))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(privPath, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPrivateKey(privPath)
		if !errors.Is(err, ErrInsecureKeyFile) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(privPath, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPrivateKey(privPath); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}

func TestParseKeyFilesRejects(t *testing.T) {
	k := testKey(t, "k1", 5)
	seed := b64.EncodeToString(k.Key.Seed())
	pub := b64.EncodeToString(k.Public().Key)
	tests := []struct {
		name    string
		private bool
		data    string
		code    Code
		pointer string
	}{
		{"not JSON", true, `keyId=k1`, CodeProtocolViolation, ""},
		{"duplicate member", true, `{"keyId":"k1","keyId":"k2","alg":"Ed25519","privateKey":"` + seed + `"}`, CodeProtocolViolation, "/keyId"},
		{"an array", true, `[]`, CodeSchemaValidationFailed, ""},
		{"missing keyId", true, `{"alg":"Ed25519","privateKey":"` + seed + `"}`, CodeSchemaValidationFailed, "/keyId"},
		{"bad keyId", true, `{"keyId":"k 1","alg":"Ed25519","privateKey":"` + seed + `"}`, CodeSchemaValidationFailed, "/keyId"},
		{"wrong alg", true, `{"keyId":"k1","alg":"Ed448","privateKey":"` + seed + `"}`, CodeSchemaValidationFailed, "/alg"},
		{"unknown member", true, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + seed + `","x":1}`, CodeSchemaValidationFailed, "/x"},
		{"public member in a private file", true, `{"keyId":"k1","alg":"Ed25519","publicKey":"` + pub + `"}`, CodeSchemaValidationFailed, "/publicKey"},
		{"seed padded", true, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + seed + `="}`, CodeSchemaValidationFailed, "/privateKey"},
		{"seed short", true, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + seed[:40] + `"}`, CodeSchemaValidationFailed, "/privateKey"},
		{"seed not base64url", true, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + "+" + seed[1:] + `"}`, CodeSchemaValidationFailed, "/privateKey"},
		{"seed a number", true, `{"keyId":"k1","alg":"Ed25519","privateKey":1}`, CodeSchemaValidationFailed, "/privateKey"},
		{"64-byte private key instead of seed", true, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + b64.EncodeToString(k.Key) + `"}`, CodeSchemaValidationFailed, "/privateKey"},
		{"public key short", false, `{"keyId":"k1","alg":"Ed25519","publicKey":"` + pub[:42] + `"}`, CodeSchemaValidationFailed, "/publicKey"},
		{"public key missing", false, `{"keyId":"k1","alg":"Ed25519"}`, CodeSchemaValidationFailed, "/publicKey"},
		{"private member in a public file", false, `{"keyId":"k1","alg":"Ed25519","privateKey":"` + seed + `"}`, CodeSchemaValidationFailed, "/privateKey"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.private {
				_, err = ParsePrivateKey([]byte(tc.data))
			} else {
				_, err = ParsePublicKey([]byte(tc.data))
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != tc.code || pe.Pointer != tc.pointer {
				t.Fatalf("got %v, want %s at %q", err, tc.code, tc.pointer)
			}
		})
	}
	// The same through the file loaders, which name the file.
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.pub")
	if err := os.WriteFile(path, []byte(tests[len(tests)-1].data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublicKey(path); CodeOf(err) != CodeSchemaValidationFailed || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadPublicKey: %v", err)
	}
	if _, err := LoadPublicKey(filepath.Join(dir, "missing.pub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadPublicKey(dir); err == nil {
		t.Fatal("loaded a directory")
	}
	big := filepath.Join(dir, "big.pub")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), maxKeyFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublicKey(big); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("oversized file: %v", err)
	}
	// A verifying key decoded from a file verifies what the private key signed.
	if got, err := ParsePublicKey([]byte(`{"keyId":"k1","alg":"Ed25519","publicKey":"` + pub + `"}`)); err != nil || !ed25519.Verify(got.Key, []byte("m"), ed25519.Sign(k.Key, []byte("m"))) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
}

// ValidKeyID is the keyId pattern written out: it agrees with the regexp
// on generated strings near the pattern's edges and on a fixed table.
func TestValidKeyIDMatchesPattern(t *testing.T) {
	for _, id := range []string{"", "a", "-a", ".a", "a-", "agent:w1#k1", "authority-1#k1", "a b", "a\n", "é", strings.Repeat("a", 256), strings.Repeat("a", 257), "A/._:#-9"} {
		if got, want := ValidKeyID(id), keyIDPattern.MatchString(id); got != want {
			t.Errorf("ValidKeyID(%q) = %v, pattern says %v", id, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		alphabet := []rune("aZ09._:#/- \n\té\x00~")
		n := rapid.IntRange(0, 260).Draw(t, "len")
		b := make([]rune, n)
		for i := range b {
			b[i] = rapid.SampledFrom(alphabet).Draw(t, "c")
		}
		id := string(b)
		if got, want := ValidKeyID(id), keyIDPattern.MatchString(id); got != want {
			t.Fatalf("ValidKeyID(%q) = %v, pattern says %v", id, got, want)
		}
	})
}
