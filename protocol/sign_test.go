package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"
)

// A ~1 KiB work.submit Command, the typical inbound frame payload.
const testCommand = `{
  "actionId": "act-01JDX7Q9W4B6Z8C0E2G4J6L8N0", "protocolVersion": "0.1",
  "actor": {"kind": "agent", "id": "worker-1"},
  "type": "work.submit", "groupId": "grp-a",
  "sessionEpoch": 3, "membershipEpoch": 1, "expectedRevision": 7,
  "correlationId": "mis-a", "issuedAt": "2026-11-30T08:00:00.120Z",
  "payload": {
    "workItemId": "wi-7", "leaseId": "lease-42", "ownershipEpoch": 2,
    "artifacts": [
      "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256:60303ae2"
    ],
    "evidence": [
      {"subject": "wi-7", "criteria": "ac-1", "method": "go test ./...", "result": "pass",
       "producer": "worker-1", "timestamp": "2026-11-30T07:59:58Z", "artifacts": []},
      {"subject": "wi-7", "criteria": "ac-2", "method": "review", "result": "pass",
       "producer": "worker-1", "timestamp": "2026-11-30T07:59:59.5Z", "artifacts": []}
    ],
    "usage": {"money": 0.42, "tokens": 18250, "toolCalls": 12, "computeSeconds": 31.5,
              "wallClockSeconds": 95, "sideEffects": 0},
    "notes": "patch applies cleanly; résumé ✓ \u00e9",
    "final": true, "reviewer": null
  },
  "extensions": {"urn:example:trace": {"critical": false, "data": {"span": "a1b2c3", "depth": 2}}}
}`

var testNow = time.Date(2026, 11, 30, 8, 0, 0, 120e6, time.UTC)

// testKey derives a key from a one-byte pattern so tests need no randomness.
func testKey(t testing.TB, keyID string, b byte) PrivateKey {
	t.Helper()
	k, err := GenerateKey(keyID, bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func parseDoc(t testing.TB, s string) map[string]any {
	t.Helper()
	v, err := Parse([]byte(s), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", s)
	}
	return m
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// signedCommandText is testCommand signed by the test agent key, as
// canonical text, with that key.
func signedCommandText(t testing.TB) (PrivateKey, []byte) {
	t.Helper()
	k := testKey(t, "agent:worker-1#k1", 7)
	signed, err := Canonical(signedCommand(t, k))
	if err != nil {
		t.Fatal(err)
	}
	return k, signed
}

func signedCommand(t testing.TB, k PrivateKey) map[string]any {
	t.Helper()
	doc := parseDoc(t, testCommand)
	if err := SignCommand(doc, k); err != nil {
		t.Fatal(err)
	}
	return doc
}

func wantAuthError(t *testing.T, err error, pointer string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeAuthInvalidSignature {
		t.Fatalf("want AUTH_INVALID_SIGNATURE, got %v", err)
	}
	if pointer != "*" && pe.Pointer != pointer {
		t.Fatalf("pointer %q, want %q (%v)", pe.Pointer, pointer, err)
	}
	if pe.Message == "" {
		t.Fatal("empty message")
	}
}

func TestSignVerifyDocuments(t *testing.T) {
	k := testKey(t, "agent:worker-1#k1", 7)
	keys := NewKeySet(k.Public())
	tests := []struct {
		name, doc, sign, wantCreated string
	}{
		{"command", testCommand, "command", "2026-11-30T08:00:00.120Z"},
		{"event", `{"eventId":"evt-1","groupId":"grp-a","sequence":42,"aggregate":{"kind":"workItem","id":"wi-7"},
			"revision":5,"type":"work.offer.accepted","actor":{"kind":"agent","id":"worker-1"},"causationId":"act-1",
			"correlationId":"mis-a","occurredAt":"2026-11-30T08:00:00.120Z","acceptedBy":"authority-1","payload":{}}`,
			"event", "2026-11-30T08:00:00.120Z"},
		{"hello proof", `{"agentId":"worker-1","sessionEpoch":3,"nonce":"n0nce-0123456789ab","issuedAt":"2026-11-30T08:00:00Z"}`,
			"document", "2026-11-30T08:00:00Z"},
		{"manifest", `{"contentHash":"sha256:00","mediaType":"text/plain","createdAt":"2026-11-30T07:00:00.5Z"}`,
			"document", "2026-11-30T07:00:00.5Z"},
		{"replaces an old signature", `{"issuedAt":"2026-11-30T08:00:00Z","signature":{"alg":"x","extra":1}}`,
			"document", "2026-11-30T08:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := parseDoc(t, tc.doc)
			var err error
			switch tc.sign {
			case "command":
				err = SignCommand(doc, k)
			case "event":
				err = SignEvent(doc, k)
			default:
				err = SignDocument(doc, k)
			}
			if err != nil {
				t.Fatal(err)
			}
			sig := doc["signature"].(map[string]any)
			if sig["alg"] != "Ed25519" || sig["keyId"] != k.KeyID || sig["createdAt"] != tc.wantCreated || len(sig["value"].(string)) != 86 {
				t.Fatalf("signature %v", sig)
			}
			before, _ := Canonical(doc)
			if err := Verify(doc, keys); err != nil {
				t.Fatal(err)
			}
			after, _ := Canonical(doc)
			if !bytes.Equal(before, after) {
				t.Fatal("Verify changed the document")
			}
			// The signing input is the document without signature.value.
			in, err := SigningInput(doc)
			if err != nil {
				t.Fatal(err)
			}
			bare := deepCopy(doc).(map[string]any)
			delete(bare["signature"].(map[string]any), "value")
			want, _ := Canonical(bare)
			if !bytes.Equal(in, want) {
				t.Fatalf("signing input\n%s\nwant\n%s", in, want)
			}
		})
	}
}

func TestSignWithExplicitTime(t *testing.T) {
	k := testKey(t, "key-1", 7)
	tests := []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), "2026-11-30T08:00:00Z"},
		{time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC), "2026-11-30T08:00:00.123Z"},
		{time.Date(2026, 11, 30, 9, 0, 0, 120e6, time.FixedZone("X", 3600)), "2026-11-30T08:00:00.120Z"},
	}
	for _, tc := range tests {
		doc := map[string]any{"contextId": "ctx-1"}
		if err := Sign(doc, k, tc.at); err != nil {
			t.Fatal(err)
		}
		if got := doc["signature"].(map[string]any)["createdAt"]; got != tc.want {
			t.Fatalf("createdAt %v, want %s", got, tc.want)
		}
		if err := Verify(doc, NewKeySet(k.Public())); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	k := testKey(t, "key-1", 7)
	tests := []struct {
		name string
		doc  string
		sign func(map[string]any) error
		code Code
	}{
		{"document without a time", `{"a":1}`, func(d map[string]any) error { return SignDocument(d, k) }, CodeSchemaValidationFailed},
		{"command without issuedAt", `{"occurredAt":"2026-11-30T08:00:00Z"}`, func(d map[string]any) error { return SignCommand(d, k) }, CodeSchemaValidationFailed},
		{"event without occurredAt", `{"issuedAt":"2026-11-30T08:00:00Z"}`, func(d map[string]any) error { return SignEvent(d, k) }, CodeSchemaValidationFailed},
		{"issuedAt not a string", `{"issuedAt":5}`, func(d map[string]any) error { return SignCommand(d, k) }, CodeSchemaValidationFailed},
		{"issuedAt not a wire time", `{"issuedAt":"2026-11-30 08:00:00"}`, func(d map[string]any) error { return SignCommand(d, k) }, CodeSchemaValidationFailed},
		{"explicit time differs from issuedAt", `{"issuedAt":"2026-11-30T08:00:00Z"}`,
			func(d map[string]any) error { return Sign(d, k, testNow) }, CodeAuthInvalidSignature},
		{"event whose issuedAt differs", `{"issuedAt":"2026-11-30T08:00:00Z","occurredAt":"2026-11-30T08:00:01Z"}`,
			func(d map[string]any) error { return SignEvent(d, k) }, CodeAuthInvalidSignature},
		{"short key", `{"issuedAt":"2026-11-30T08:00:00Z"}`,
			func(d map[string]any) error { return SignCommand(d, PrivateKey{KeyID: "k", Key: k.Key[:10]}) }, CodeInternalError},
		{"bad key id", `{"issuedAt":"2026-11-30T08:00:00Z"}`,
			func(d map[string]any) error { return SignCommand(d, PrivateKey{KeyID: "-k", Key: k.Key}) }, CodeInternalError},
		{"unrepresentable year", `{"a":1}`,
			func(d map[string]any) error { return Sign(d, k, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) }, CodeInternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := parseDoc(t, tc.doc)
			before, _ := Canonical(doc)
			err := tc.sign(doc)
			if err == nil {
				t.Fatal("signed")
			}
			if CodeOf(err) != tc.code {
				t.Fatalf("code %s, want %s (%v)", CodeOf(err), tc.code, err)
			}
			if after, _ := Canonical(doc); !bytes.Equal(before, after) {
				t.Fatal("a refused Sign changed the document")
			}
		})
	}
	if err := Sign(nil, k, testNow); err == nil {
		t.Fatal("signed a nil document")
	}
}

// leaves lists the JSON pointer paths of every scalar in v.
func leaves(v any, path []string, out *[][]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			leaves(e, append(slices.Clone(path), k), out)
		}
	case []any:
		for i, e := range x {
			leaves(e, append(slices.Clone(path), fmt.Sprint(i)), out)
		}
	default:
		*out = append(*out, path)
	}
}

// at returns the container holding path's last element and its key.
func at(doc any, path []string) (parent any, key string) {
	cur := doc
	for _, p := range path[:len(path)-1] {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[p]
		case []any:
			var i int
			fmt.Sscan(p, &i)
			cur = x[i]
		}
	}
	return cur, path[len(path)-1]
}

func set(parent any, key string, v any) {
	switch x := parent.(type) {
	case map[string]any:
		x[key] = v
	case []any:
		var i int
		fmt.Sscan(key, &i)
		x[i] = v
	}
}

func get(parent any, key string) any {
	switch x := parent.(type) {
	case map[string]any:
		return x[key]
	case []any:
		var i int
		fmt.Sscan(key, &i)
		return x[i]
	}
	return nil
}

// changed returns a different value of the same JSON kind where possible.
func changed(v any) any {
	switch x := v.(type) {
	case string:
		return x + "x"
	case json.Number:
		return x + "1"
	case bool:
		return !x
	case nil:
		return false
	}
	return "?"
}

// TestTamperAnyMember changes, removes and adds members everywhere in a
// signed Command; every change must break verification.
func TestTamperAnyMember(t *testing.T) {
	k := testKey(t, "agent:worker-1#k1", 7)
	keys := NewKeySet(k.Public())
	signed := signedCommand(t, k)
	var paths [][]string
	leaves(signed, nil, &paths)
	if len(paths) < 40 {
		t.Fatalf("only %d leaves; the test document shrank", len(paths))
	}
	tested := 0
	for _, path := range paths {
		ptr := pointerOf(path)
		if ptr == "/signature/value" {
			continue
		}
		mutations := map[string]func(parent any, key string){
			"change": func(p any, key string) { set(p, key, changed(get(p, key))) },
			"retype": func(p any, key string) { set(p, key, []any{get(p, key)}) },
		}
		if parent, _ := at(signed, path); isObject(parent) {
			mutations["remove"] = func(p any, key string) { delete(p.(map[string]any), key) }
			mutations["add sibling"] = func(p any, key string) { p.(map[string]any)["zz"+key] = "added" }
		}
		for name, mutate := range mutations {
			doc := deepCopy(signed).(map[string]any)
			parent, key := at(doc, path)
			before, _ := Canonical(doc)
			mutate(parent, key)
			if after, _ := Canonical(doc); bytes.Equal(before, after) {
				continue // the mutation was a no-op (e.g. removing from a one-element array)
			}
			tested++
			err := Verify(doc, keys)
			if err == nil {
				t.Errorf("%s %s: still verifies", name, ptr)
				continue
			}
			if CodeOf(err) != CodeAuthInvalidSignature {
				t.Errorf("%s %s: %v", name, ptr, err)
			}
		}
	}
	if tested < 3*len(paths) {
		t.Fatalf("only %d effective mutations for %d leaves", tested, len(paths))
	}
	// Arrays: one element more or less.
	for _, name := range []string{"artifacts", "evidence"} {
		for _, grow := range []bool{true, false} {
			doc := deepCopy(signed).(map[string]any)
			pl := doc["payload"].(map[string]any)
			a := pl[name].([]any)
			if grow {
				pl[name] = append(a, a[0])
			} else {
				pl[name] = a[:len(a)-1]
			}
			wantAuthError(t, Verify(doc, keys), "/signature/value")
		}
	}
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

func TestVerifyRejects(t *testing.T) {
	k := testKey(t, "agent:worker-1#k1", 7)
	other := testKey(t, "agent:worker-2#k1", 9)
	keys := NewKeySet(k.Public(), other.Public())
	sigOf := func(d map[string]any) map[string]any { return d["signature"].(map[string]any) }
	value := sigOf(signedCommand(t, k))["value"].(string)
	tests := []struct {
		name    string
		mutate  func(d map[string]any)
		keys    KeyResolver
		pointer string
	}{
		{"no signature", func(d map[string]any) { delete(d, "signature") }, keys, "/signature"},
		{"signature not an object", func(d map[string]any) { d["signature"] = value }, keys, "/signature"},
		{"alg missing", func(d map[string]any) { delete(sigOf(d), "alg") }, keys, "/signature/alg"},
		{"alg EdDSA", func(d map[string]any) { sigOf(d)["alg"] = "EdDSA" }, keys, "/signature/alg"},
		{"alg lower case", func(d map[string]any) { sigOf(d)["alg"] = "ed25519" }, keys, "/signature/alg"},
		{"keyId missing", func(d map[string]any) { delete(sigOf(d), "keyId") }, keys, "/signature/keyId"},
		{"keyId not a key id", func(d map[string]any) { sigOf(d)["keyId"] = "bad key" }, keys, "/signature/keyId"},
		{"unknown keyId", func(d map[string]any) { sigOf(d)["keyId"] = "agent:worker-1#k2" }, keys, "/signature/keyId"},
		{"another known key", func(d map[string]any) { sigOf(d)["keyId"] = other.KeyID }, keys, "/signature/value"},
		{"wrong key under the id", func(d map[string]any) {}, KeySet{k.KeyID: other.Public().Key}, "/signature/value"},
		{"resolver key of the wrong size", func(d map[string]any) {}, KeySet{k.KeyID: k.Public().Key[:31]}, "/signature/keyId"},
		{"nil resolver", func(d map[string]any) {}, nil, "/signature/keyId"},
		{"empty key set", func(d map[string]any) {}, KeySet(nil), "/signature/keyId"},
		{"createdAt missing", func(d map[string]any) { delete(sigOf(d), "createdAt") }, keys, "/signature/createdAt"},
		{"createdAt not a wire time", func(d map[string]any) { sigOf(d)["createdAt"] = "2026-11-30T08:00:00.120+00:00" }, keys, "/signature/createdAt"},
		{"createdAt moved", func(d map[string]any) { sigOf(d)["createdAt"] = "2026-11-30T08:00:01.120Z" }, keys, "/signature/createdAt"},
		{"createdAt and issuedAt moved together", func(d map[string]any) {
			sigOf(d)["createdAt"] = "2026-11-30T08:00:01Z"
			d["issuedAt"] = "2026-11-30T08:00:01Z"
		}, keys, "/signature/value"},
		{"same instant, other spelling", func(d map[string]any) { sigOf(d)["createdAt"] = "2026-11-30T08:00:00.12Z" }, keys, "/signature/value"},
		{"issuedAt not a string", func(d map[string]any) { d["issuedAt"] = json.Number("1") }, keys, "/issuedAt"},
		{"value missing", func(d map[string]any) { delete(sigOf(d), "value") }, keys, "/signature/value"},
		{"value not a string", func(d map[string]any) { sigOf(d)["value"] = json.Number("1") }, keys, "/signature/value"},
		{"value padded", func(d map[string]any) { sigOf(d)["value"] = value + "==" }, keys, "/signature/value"},
		{"value too short", func(d map[string]any) { sigOf(d)["value"] = value[:85] }, keys, "/signature/value"},
		{"value too long", func(d map[string]any) { sigOf(d)["value"] = value + "A" }, keys, "/signature/value"},
		{"value empty", func(d map[string]any) { sigOf(d)["value"] = "" }, keys, "/signature/value"},
		{"value standard base64", func(d map[string]any) { sigOf(d)["value"] = "+/" + value[2:] }, keys, "/signature/value"},
		{"value non-base64", func(d map[string]any) { sigOf(d)["value"] = "!" + value[1:] }, keys, "/signature/value"},
		// The 86th character carries 2 bits of padding; a non-zero one is a
		// second spelling of the same bytes and is refused.
		{"value with trailing bits", func(d map[string]any) {
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			v := []byte(value)
			v[85] = alphabet[strings.IndexByte(alphabet, v[85])|1]
			sigOf(d)["value"] = string(v)
		}, keys, "/signature/value"},
		{"value bit flipped", func(d map[string]any) {
			raw, _ := b64.DecodeString(value)
			raw[10] ^= 1
			sigOf(d)["value"] = b64.EncodeToString(raw)
		}, keys, "/signature/value"},
		{"unknown signature member", func(d map[string]any) { sigOf(d)["nonce"] = "x" }, keys, "/signature/nonce"},
		{"uncanonicalizable value", func(d map[string]any) { d["payload"] = []string{"x"} }, keys, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := signedCommand(t, k)
			tc.mutate(doc)
			wantAuthError(t, Verify(doc, tc.keys), tc.pointer)
		})
	}
	wantAuthError(t, Verify(nil, keys), "")
	if _, err := SigningInput(map[string]any{}); CodeOf(err) != CodeAuthInvalidSignature {
		t.Fatalf("SigningInput without signature: %v", err)
	}
}

// TestVerifyIgnoresLayout: member order and whitespace are not signed.
func TestVerifyIgnoresLayout(t *testing.T) {
	k := testKey(t, "agent:worker-1#k1", 7)
	doc := signedCommand(t, k)
	var reversed bytes.Buffer
	writeReversed(&reversed, doc, "\n")
	if bytes.Contains(reversed.Bytes(), []byte(`{"actionId"`)) || !bytes.Contains(reversed.Bytes(), []byte("\n  ")) {
		t.Fatalf("not reordered and indented:\n%s", reversed.Bytes())
	}
	again, err := Parse(reversed.Bytes(), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(again.(map[string]any), NewKeySet(k.Public())); err != nil {
		t.Fatalf("%v\n%s", err, reversed.Bytes())
	}
}

// writeReversed prints v indented, with members in reverse sorted order
// and numbers as their original literals.
func writeReversed(b *bytes.Buffer, v any, indent string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(indent + "  ")
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(" :\t")
			writeReversed(b, x[k], indent+"  ")
		}
		b.WriteString(indent + "}")
	case []any:
		b.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(" , ")
			}
			writeReversed(b, e, indent+"  ")
		}
		b.WriteString(" ]")
	case string:
		// \u escapes for everything but ASCII letters and digits: another
		// spelling of the same string.
		b.WriteByte('"')
		for _, u := range utf16.Encode([]rune(x)) {
			if u < 0x80 && (unicode.IsLetter(rune(u)) || unicode.IsDigit(rune(u))) {
				b.WriteByte(byte(u))
			} else {
				fmt.Fprintf(b, "\\u%04x", u)
			}
		}
		b.WriteByte('"')
	default:
		vb, _ := json.Marshal(x)
		b.Write(vb)
	}
}

// TestKnownAnswer pins the signature of a fixed document under a fixed key.
// Ed25519 is deterministic, so the value below, computed once by running
// this code, changes only if the signing input changes (member removal,
// canonical form, createdAt handling): a guard against silently breaking
// every signature already on the wire or in a log. The public key is the
// well-known one for this seed, and the value was cross-checked with
// Python's cryptography package signing wantInput.
func TestKnownAnswer(t *testing.T) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1) // 0x01 0x02 … 0x20
	}
	k := PrivateKey{KeyID: "agent:w1#k1", Key: ed25519.NewKeyFromSeed(seed)}
	doc := parseDoc(t, `{"actionId":"act-1","protocolVersion":"0.1","actor":{"kind":"agent","id":"w1"},
		"type":"work.accept_offer","groupId":"grp-a","sessionEpoch":3,"membershipEpoch":1,
		"correlationId":"mis-a","issuedAt":"2026-11-30T08:00:00Z","payload":{"workItemId":"wi-7","note":"é\u2028"}}`)
	if err := SignCommand(doc, k); err != nil {
		t.Fatal(err)
	}
	const (
		wantInput = `{"actionId":"act-1","actor":{"id":"w1","kind":"agent"},"correlationId":"mis-a","groupId":"grp-a",` +
			`"issuedAt":"2026-11-30T08:00:00Z","membershipEpoch":1,"payload":{"note":"é` + "\u2028" + `","workItemId":"wi-7"},` +
			`"protocolVersion":"0.1","sessionEpoch":3,"signature":{"alg":"Ed25519","createdAt":"2026-11-30T08:00:00Z",` +
			`"keyId":"agent:w1#k1"},"type":"work.accept_offer"}`
		wantPub   = "ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ"
		wantValue = "u1CfgAe9NxK5J439_40dUNNLw3DohhrWG7G9tAemnEvPdWXaZkCIk_KV6HLnCWoKacWOaAUwLcIhzx2d6W0aDQ"
	)
	if in, _ := SigningInput(doc); string(in) != wantInput {
		t.Fatalf("signing input\n%s\nwant\n%s", in, wantInput)
	}
	if got := k.Public().Encode().PublicKey; got != wantPub {
		t.Fatalf("public key %s, want %s", got, wantPub)
	}
	if got := doc["signature"].(map[string]any)["value"]; got != wantValue {
		in, _ := SigningInput(doc)
		t.Fatalf("signature value %s, want %s\nsigning input: %s", got, wantValue, in)
	}
	if err := Verify(doc, NewKeySet(k.Public())); err != nil {
		t.Fatal(err)
	}
}

func TestFreshness(t *testing.T) {
	issued := testNow // the test Command's issuedAt
	tests := []struct {
		name   string
		now    time.Time
		skew   time.Duration
		wantOK bool
	}{
		{"same instant", issued, DefaultMaxSkew, true},
		{"received a little later", issued.Add(30 * time.Second), DefaultMaxSkew, true},
		{"exactly max skew old", issued.Add(DefaultMaxSkew), DefaultMaxSkew, true},
		{"one millisecond too old", issued.Add(DefaultMaxSkew + time.Millisecond), DefaultMaxSkew, false},
		{"an hour old", issued.Add(time.Hour), DefaultMaxSkew, false},
		{"exactly max skew ahead", issued.Add(-DefaultMaxSkew), DefaultMaxSkew, true},
		{"one millisecond too far ahead", issued.Add(-DefaultMaxSkew - time.Millisecond), DefaultMaxSkew, false},
		{"a day ahead", issued.Add(-24 * time.Hour), DefaultMaxSkew, false},
		{"zero skew, same instant", issued, 0, true},
		{"zero skew, a nanosecond off", issued.Add(time.Nanosecond), 0, false},
		{"negative skew acts as zero", issued.Add(time.Nanosecond), -time.Minute, false},
		{"custom skew", issued.Add(9 * time.Minute), 10 * time.Minute, true},
	}
	k := testKey(t, "agent:worker-1#k1", 7)
	keys := NewKeySet(k.Public())
	doc := signedCommand(t, k)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFreshness(issued, tc.now, tc.skew)
			if tc.wantOK != (err == nil) {
				t.Fatalf("CheckFreshness: %v", err)
			}
			if err != nil {
				wantAuthError(t, err, "")
			}
			err = VerifyFresh(doc, keys, tc.now, tc.skew)
			if tc.wantOK != (err == nil) {
				t.Fatalf("VerifyFresh: %v", err)
			}
			if err != nil {
				wantAuthError(t, err, "/issuedAt")
			}
		})
	}
	// A bad signature is reported before freshness.
	bad := deepCopy(doc).(map[string]any)
	bad["type"] = "work.fail"
	wantAuthError(t, VerifyFresh(bad, keys, issued.Add(time.Hour), DefaultMaxSkew), "/signature/value")
	// Events carry occurredAt, not issuedAt: no freshness for them.
	ev := map[string]any{"eventId": "evt-1", "occurredAt": "2026-11-30T08:00:00Z"}
	if err := SignEvent(ev, k); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ev, keys); err != nil {
		t.Fatal(err)
	}
	wantAuthError(t, VerifyFresh(ev, keys, issued, DefaultMaxSkew), "/issuedAt")
}

func TestKeyIDs(t *testing.T) {
	if got := KeyIDFor(ActorAgent, "w1", "k1"); got != "agent:w1#k1" {
		t.Fatalf("KeyIDFor = %s", got)
	}
	tests := []struct {
		keyID string
		kind  ActorKind
		id    string
		want  bool
	}{
		{"agent:w1#k1", ActorAgent, "w1", true},
		{"human:alice#laptop-2026", ActorHuman, "alice", true},
		{"service:org.auth:1#k.v2", ActorService, "org.auth:1", true},
		{"agent:w1#k1", ActorHuman, "w1", false},   // another kind
		{"agent:w1#k1", ActorAgent, "w", false},    // a prefix of the id
		{"agent:w1:x#k1", ActorAgent, "w1", false}, // a longer id
		{"agent:w1#", ActorAgent, "w1", false},     // no key name
		{"agent:w1#k1#k2", ActorAgent, "w1", false},
		{"agent:w1#k/1", ActorAgent, "w1", false},
		{"agent:w1", ActorAgent, "w1", false},
		{"key-abc", ActorAgent, "w1", false},
		{"robot:w1#k1", ActorKind("robot"), "w1", false},
		{":#k1", ActorKind(""), "", false},
		{"agent:w#1#k1", ActorAgent, "w#1", false},
	}
	for _, tc := range tests {
		if got := KeyBelongsTo(tc.keyID, tc.kind, tc.id); got != tc.want {
			t.Errorf("KeyBelongsTo(%q, %s, %q) = %v", tc.keyID, tc.kind, tc.id, got)
		}
		// KeyOwner names the principal exactly when the key is one of its.
		if a, ok := KeyOwner(tc.keyID); tc.want && (!ok || a != (Actor{Kind: tc.kind, ID: tc.id})) {
			t.Errorf("KeyOwner(%q) = %v, %v", tc.keyID, a, ok)
		}
	}
	for _, bad := range []string{"agent:w1#", "agent:w1#k1#k2", "agent:w1", "key-abc", "robot:w1#k1", ":#k1", "agent:w#1#k1"} {
		if a, ok := KeyOwner(bad); ok {
			t.Errorf("KeyOwner(%q) = %v, true", bad, a)
		}
	}
}

func TestCheckCommandSigner(t *testing.T) {
	own := testKey(t, "agent:worker-1#k1", 7)
	foreign := testKey(t, "agent:worker-2#k1", 9)
	keys := NewKeySet(own.Public(), foreign.Public())
	doc := signedCommand(t, own)
	if err := Verify(doc, keys); err != nil {
		t.Fatal(err)
	}
	if err := CheckCommandSigner(doc); err != nil {
		t.Fatal(err)
	}
	// worker-2 signs a command in worker-1's name: a valid signature by
	// the wrong principal.
	doc = signedCommand(t, foreign)
	if err := Verify(doc, keys); err != nil {
		t.Fatal(err)
	}
	wantAuthError(t, CheckCommandSigner(doc), "/signature/keyId")
	wantAuthError(t, CheckCommandSigner(map[string]any{}), "/signature/keyId")
}
