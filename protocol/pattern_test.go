package protocol

import (
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// schemaPatterns lists every "pattern" in the embedded schemas.
func schemaPatterns(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if p, ok := v["pattern"].(string); ok {
				seen[p] = true
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	err := fs.WalkDir(schemaFiles, "schemas", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := schemaFiles.ReadFile(path)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		walk(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out
}

// Every schema pattern, and a few shapes the scanner must leave to
// regexp, gives compilePattern's answer equal to regexp's on strings
// built around the pattern's own characters and lengths.
func TestPatternAgreesWithRegexp(t *testing.T) {
	patterns := append(schemaPatterns(t),
		`^a[0-9]{2,3}b$`, // a varying count before another atom: regexp's
		`^[^a]{2}$`, `^x*$`, `^[a-c]{1,}$`, `^(ab){2}$`, `^ab`, `^[A-Z]{0,2}$`)
	simple := 0
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("aAzZ09_-.:#/+!$&^;Qgw=~ \t\n\fé")
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		match, err := compilePattern(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if _, ok := parseSimplePattern(p); ok {
			simple++
		}
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			if i%3 == 0 {
				// Mutate a string the pattern is likely to accept.
				b.WriteString(strings.Repeat("A", rng.IntN(300)))
			}
			for n := rng.IntN(140); n > 0; n-- {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			for _, v := range []string{b.String(), "sha256:" + strings.Repeat("0", 64), strings.Repeat("a", 85) + "A", strings.Repeat("a", 42) + "E", "ext.a.b.c", "a" + strings.Repeat("b", rng.IntN(260)),
				nearTime(rng), "urn:" + strings.Repeat("a", rng.IntN(40)) + ":x", []string{"urn:", "http://", "https://", "urn:a:", "htt"}[rng.IntN(5)] + b.String()[:rng.IntN(b.Len()+1)]} {
				if got, want := match(v), re.MatchString(v); got != want {
					t.Fatalf("pattern %s on %q: %v, regexp %v", p, v, got, want)
				}
			}
		}
	}
	if simple < 6 {
		t.Fatalf("only %d patterns take the scan", simple)
	}
}

// nearTime is a wire time with a few bytes changed, cut or added: the
// strings where the time pattern's scan and regexp could part.
func nearTime(rng *rand.Rand) string {
	b := []byte([]string{"2026-11-30T08:00:30Z", "2026-11-30T08:00:30.1Z", "1999-12-31T23:59:59.999Z", "0000-01-01T00:00:00.00Z"}[rng.IntN(4)])
	digits := "0123456789-:.TZz3"
	for n := rng.IntN(3); n > 0; n-- {
		b[rng.IntN(len(b))] = digits[rng.IntN(len(digits))]
	}
	switch rng.IntN(4) {
	case 0:
		b = b[:rng.IntN(len(b))]
	case 1:
		b = append(b, digits[rng.IntN(len(digits))])
	}
	return string(b)
}
