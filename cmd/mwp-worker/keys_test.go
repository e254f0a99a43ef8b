package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"mwp-worker"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

const cliCommand = `{"actionId":"act-1","protocolVersion":"0.1","actor":{"kind":"agent","id":"w1"},
  "type":"work.accept_offer","groupId":"grp-a","sessionEpoch":3,"membershipEpoch":1,
  "correlationId":"mis-a","issuedAt":"2026-11-30T08:00:00Z","payload":{"workItemId":"wi-7"}}`

func TestKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	code, out, errOut := runCLI(t, "keygen", "--out", keyDir, "--name", "w1", "--key-id", "agent:w1#k1")
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	priv, pub := filepath.Join(keyDir, "w1.key"), filepath.Join(keyDir, "w1.pub")
	for _, want := range []string{"agent:w1#k1", priv, pub} {
		if !strings.Contains(out, want) {
			t.Fatalf("keygen output %q lacks %q", out, want)
		}
	}
	if code, _, errOut := runCLI(t, "keygen", "--out", keyDir, "--name", "w1"); code == 0 || !strings.Contains(errOut, "refusing to overwrite") {
		t.Fatalf("keygen over an existing key: %d %s", code, errOut)
	}
	// w2 has w1's key id but another key; w3 is another principal's key.
	for name, id := range map[string]string{"w2": "agent:w1#k1", "w3": "agent:w3#k1"} {
		if code, _, errOut := runCLI(t, "keygen", "--out", keyDir, "--name", name, "--key-id", id); code != 0 {
			t.Fatalf("keygen %s: %s", name, errOut)
		}
	}

	unsigned := filepath.Join(dir, "cmd.json")
	if err := os.WriteFile(unsigned, []byte(cliCommand), 0o644); err != nil {
		t.Fatal(err)
	}
	code, signedOut, errOut := runCLI(t, "sign", "--key", priv, unsigned)
	if code != 0 {
		t.Fatalf("sign: %s", errOut)
	}
	if !strings.HasSuffix(signedOut, "}\n") || !strings.Contains(signedOut, `"signature":{"alg":"Ed25519","createdAt":"2026-11-30T08:00:00Z","keyId":"agent:w1#k1","value":"`) {
		t.Fatalf("signed output %s", signedOut)
	}
	signed := filepath.Join(dir, "signed.json")
	tampered := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(signed, []byte(signedOut), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, []byte(strings.Replace(signedOut, `"wi-7"`, `"wi-8"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Signed at a time no test machine's clock is near.
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(strings.ReplaceAll(cliCommand, "2026-11-30T08:00:00Z", "2001-01-01T00:00:00Z")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, oldOut, errOut := runCLI(t, "sign", "--key", priv, old)
	if code != 0 {
		t.Fatalf("sign: %s", errOut)
	}
	if err := os.WriteFile(old, []byte(oldOut), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notJSON, []byte(`{"a":1,"a":2}`), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"ok", []string{"verify", "--pub", pub, signed}, 0, []string{signed + ": ok"}},
		{"tampered", []string{"verify", "--pub", pub, signed, tampered}, 1,
			[]string{signed + ": ok", tampered + ": AUTH_INVALID_SIGNATURE: /signature/value: "}},
		{"wrong key", []string{"verify", "--pub", filepath.Join(keyDir, "w2.pub"), signed}, 1,
			[]string{signed + ": AUTH_INVALID_SIGNATURE: /signature/value: "}},
		{"unknown key", []string{"verify", "--pub", filepath.Join(keyDir, "w3.pub"), signed}, 1,
			[]string{signed + ": AUTH_INVALID_SIGNATURE: /signature/keyId: "}},
		{"one key id, two keys", []string{"verify", "--pub", pub, "--pub", filepath.Join(keyDir, "w2.pub"), signed}, 1, nil},
		{"several keys", []string{"verify", "--pub", filepath.Join(keyDir, "w3.pub"), "--pub", pub, signed, old}, 0,
			[]string{signed + ": ok", old + ": ok"}},
		{"unsigned", []string{"verify", "--pub", pub, unsigned}, 1,
			[]string{unsigned + ": AUTH_INVALID_SIGNATURE: /signature: "}},
		{"not strict JSON", []string{"verify", "--pub", pub, notJSON}, 1,
			[]string{notJSON + ": PROTOCOL_VIOLATION: /a: "}},
		{"fresh", []string{"verify", "--pub", pub, "--now", "2026-11-30T08:01:00Z", signed}, 0, []string{signed + ": ok"}},
		{"stale", []string{"verify", "--pub", pub, "--now", "2026-11-30T08:02:00.001Z", signed}, 1,
			[]string{signed + ": AUTH_INVALID_SIGNATURE: /issuedAt: "}},
		{"future", []string{"verify", "--pub", pub, "--now", "2026-11-30T07:00:00Z", signed}, 1,
			[]string{signed + ": AUTH_INVALID_SIGNATURE: /issuedAt: "}},
		{"wider skew", []string{"verify", "--pub", pub, "--now", "2026-11-30T07:00:00Z", "--max-skew", "1h", signed}, 0, nil},
		// --max-skew alone checks freshness against the real clock.
		{"max-skew alone", []string{"verify", "--pub", pub, "--max-skew", "1h", old}, 1,
			[]string{old + ": AUTH_INVALID_SIGNATURE: /issuedAt: "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Fatalf("output %q lacks %q", out, w)
				}
			}
		})
	}
}

func TestSignRefuses(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "keygen", "--out", dir); code != 0 {
		t.Fatal(errOut)
	}
	priv := filepath.Join(dir, "mwp.key")
	noTime := filepath.Join(dir, "notime.json")
	if err := os.WriteFile(noTime, []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmdFile := filepath.Join(dir, "cmd.json")
	if err := os.WriteFile(cmdFile, []byte(cliCommand), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no time", []string{"sign", "--key", priv, noTime}, "SCHEMA_VALIDATION_FAILED"},
		{"created-at against issuedAt", []string{"sign", "--key", priv, "--created-at", "2026-11-30T09:00:00Z", cmdFile}, "AUTH_INVALID_SIGNATURE: /signature/createdAt"},
		{"bad created-at", []string{"sign", "--key", priv, "--created-at", "yesterday", noTime}, "--created-at"},
		{"missing key", []string{"sign", "--key", filepath.Join(dir, "none.key"), noTime}, "none.key"},
		{"missing doc", []string{"sign", "--key", priv, filepath.Join(dir, "none.json")}, "none.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, tc.want)
			}
		})
	}
	code, out, errOut := runCLI(t, "sign", "--key", priv, "--created-at", "2026-11-30T08:00:00.5Z", noTime)
	if code != 0 || !strings.Contains(out, `"createdAt":"2026-11-30T08:00:00.500Z"`) {
		t.Fatalf("sign --created-at: %d %s %s", code, out, errOut)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(priv, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "sign", "--key", priv, cmdFile)
		if code != 1 || !strings.Contains(errOut, "chmod 600") {
			t.Fatalf("sign with a world-readable key: %d %s", code, errOut)
		}
	}
}
