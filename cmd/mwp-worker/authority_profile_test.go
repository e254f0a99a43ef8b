package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// authority sign-profile writes a profile serve --profile accepts from a
// registered policy service, and serve refuses it, in one line, from an
// unregistered signer or tampered.
func TestAuthoritySignAndServeProfile(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	for _, name := range []string{"org-policy", "stranger"} {
		if code, _, errOut := runCLI(t, "keygen", "--out", keys, "--name", name, "--key-id", "service:"+name+"#k1"); code != 0 {
			t.Fatalf("keygen: %s", errOut)
		}
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	schema := write("gpu.schema.json", `{"type": "object", "required": ["model"], "properties": {"model": {"type": "string"}}}`)
	profile := write("gpu.profile.json", `{"uri": "urn:example:ext:gpu", "version": "1.0.0", "schemaUri": "https://schemas.example/gpu.schema.json",
  "schemaHash": "", "requiredCapabilities": [], "critical": true, "organizationId": "org-1", "approvedAt": "2026-12-01T00:00:00Z"}`)
	sign := func(key string) (string, string) {
		code, out, errOut := runCLI(t, "authority", "sign-profile", "--policy-key", filepath.Join(keys, key+".key"), profile, schema)
		if code != 0 {
			t.Fatalf("sign-profile: %d %s", code, errOut)
		}
		if !strings.Contains(out, `"schemaHash":"sha256:`) || !strings.Contains(out, `"keyId":"service:`+key+`#k1"`) {
			t.Fatalf("signed profile %s", out)
		}
		return write(key+".signed.json", out), out
	}
	good, text := sign("org-policy")
	strangers, _ := sign("stranger")
	tampered := write("tampered.json", strings.Replace(text, `"critical":true`, `"critical":false`, 1))

	serve := func(p string) (int, string) {
		code, _, errOut := runCLIWithTimeout(t, 3*time.Second, "authority", "serve", "--data", filepath.Join(dir, "auth-"+filepath.Base(p)), "--listen", "127.0.0.1:0",
			"--insecure-loopback", "--policy", "org-policy="+filepath.Join(keys, "org-policy.pub"), "--profile", p+"="+schema)
		return code, errOut
	}
	for name, p := range map[string]string{"unregistered signer": strangers, "tampered": tampered} {
		code, errOut := serve(p)
		var refusals []string
		for _, line := range strings.Split(errOut, "\n") {
			if strings.HasPrefix(line, "authority serve: ") {
				refusals = append(refusals, line)
			}
		}
		if code != 1 || len(refusals) != 1 || !strings.Contains(refusals[0], "--profile") {
			t.Errorf("%s: exit %d, refusals %q", name, code, refusals)
		}
	}
	// The good one: serve starts (and stops at the deadline, exit 0).
	if code, errOut := serve(good); code != 0 {
		t.Fatalf("good profile: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "authority", "sign-profile", "--policy-key", filepath.Join(keys, "org-policy.key"), profile); code == 0 || !strings.Contains(errOut, "SCHEMA-FILE") {
		t.Fatalf("one argument: %d %q", code, errOut)
	}
}
