package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCanonAndDigest(t *testing.T) {
	f := writeFile(t, "doc.json", "{ \"b\": 1.50, \"a\": [1E2, \"\\u00e9\"] }\n")
	code, out, errs := runCLI(t, "canon", f)
	if code != 0 || out != `{"a":[100,"é"],"b":1.5}` {
		t.Fatalf("canon: code %d out %q err %q", code, out, errs)
	}
	code, out, _ = runCLI(t, "digest", f)
	// sha256 of the canonical bytes above.
	if code != 0 || !strings.HasPrefix(out, "sha256:") || len(strings.TrimSpace(out)) != 71 {
		t.Fatalf("digest: code %d out %q", code, out)
	}
	canon := writeFile(t, "c.json", `{"a":[100,"é"],"b":1.5}`)
	_, rawDigest, _ := runCLI(t, "digest", "--raw", canon)
	if rawDigest != out {
		t.Fatalf("digest of canonical form %q != raw digest of canonical bytes %q", out, rawDigest)
	}
	_, rawOrig, _ := runCLI(t, "digest", "--raw", f)
	if rawOrig == out {
		t.Fatal("--raw did not hash the file's own bytes")
	}

	dup := writeFile(t, "dup.json", `{"a":1,"a":2}`)
	code, out, errs = runCLI(t, "canon", dup)
	if code != 1 || out != "" || !strings.Contains(errs, "dup.json: PROTOCOL_VIOLATION: /a: duplicate member") {
		t.Fatalf("canon of duplicate: code %d out %q err %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "canon", filepath.Join(t.TempDir(), "missing.json"))
	if code != 1 || !strings.Contains(errs, "missing.json") {
		t.Fatalf("canon of missing file: code %d err %q", code, errs)
	}
}

func TestValidateCLI(t *testing.T) {
	valid, err := filepath.Glob(filepath.Join("..", "..", "protocol", "testdata", "conformance", "valid", "*.json"))
	if err != nil || len(valid) < 27 {
		t.Fatalf("conformance vectors missing: %v", err)
	}
	code, out, errs := runCLI(t, append([]string{"validate"}, valid...)...)
	if code != 0 {
		t.Fatalf("valid vectors: code %d\n%s%s", code, out, errs)
	}

	contract := writeFile(t, "wc.json", `{"contractId":"wc-1","revision":1}`)
	notJSON := writeFile(t, "x.json", `not json`)
	code, out, _ = runCLI(t, "validate", "--schema", "work-contract", contract, notJSON)
	if code != 1 {
		t.Fatalf("invalid files: code %d", code)
	}
	for _, want := range []string{
		contract + ": WORK_CONTRACT_INCOMPLETE: : missing required member \"goal\"",
		notJSON + ": PROTOCOL_VIOLATION: : invalid literal",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, "validate", "--json", contract, valid[0])
	var res struct {
		Valid bool `json:"valid"`
		Files []struct {
			File     string `json:"file"`
			Valid    bool   `json:"valid"`
			Problems []struct{ Code, Pointer, Message string }
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Valid || len(res.Files) != 2 {
		t.Fatalf("--json: code %d err %v out %s", code, err, out)
	}
	if res.Files[0].Valid || res.Files[0].Problems[0].Code != "WORK_CONTRACT_INCOMPLETE" || !res.Files[1].Valid {
		t.Fatalf("--json verdicts wrong: %+v", res)
	}

	if code, _, errs := runCLI(t, "validate", "--schema", "nope", contract); code != 1 || !strings.Contains(errs, "unknown schema") {
		t.Fatalf("unknown schema: code %d err %q", code, errs)
	}
}
