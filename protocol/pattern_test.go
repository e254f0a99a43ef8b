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
	alphabet := []byte("aAzZ09_-.:#/+!$&^;Qgw=~ \t\né")
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
			for _, v := range []string{b.String(), "sha256:" + strings.Repeat("0", 64), strings.Repeat("a", 85) + "A", strings.Repeat("a", 42) + "E", "ext.a.b.c", "a" + strings.Repeat("b", rng.IntN(260))} {
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
