package protocol

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestCanonicalTable(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{` [ 1 , "x" , null , true ] `, `[1,"x",null,true]`},
		{`{"n":[4.50, 1E+2, 2e-3, -0, 0.000001, 1e-7, 1e21, 1e20, 333333333.33333329]}`,
			`{"n":[4.5,100,0.002,0,0.000001,1e-7,1e+21,100000000000000000000,333333333.3333333]}`},
		{`"\u000f\u001f</script>\/é\u2028"`, "\"\\u000f\\u001f</script>/é\u2028\""},
		{`"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{`9007199254740991`, `9007199254740991`},
		{`-123456789012345`, `-123456789012345`},
		// UTF-16 order: U+E000 sorts after a supplementary character.
		{"{\"\ue000\":1,\"\U0001F600\":2,\"a\":3}", "{\"a\":3,\"\U0001F600\":2,\"\ue000\":1}"},
		{`{"":0,"a":{"d":1,"c":2}}`, `{"":0,"a":{"c":2,"d":1}}`},
	}
	for _, tt := range tests {
		got, err := CanonicalBytes([]byte(tt.in), DecodeOptions{})
		if err != nil {
			t.Errorf("CanonicalBytes(%s): %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("CanonicalBytes(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalGoValues(t *testing.T) {
	v := map[string]any{"f": 0.1, "i": 7, "j": int64(-3), "u": uint64(9), "s": "x"}
	got, err := Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"f":0.1,"i":7,"j":-3,"s":"x","u":9}`; string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), uint64(1 << 53), int64(-(1 << 53)), struct{}{}} {
		if _, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%v) accepted", bad)
		}
	}
	m, err := Marshal(struct {
		B string `json:"b"`
		A int    `json:"a"`
	}{"<&>", 1})
	if err != nil || string(m) != `{"a":1,"b":"<&>"}` {
		t.Fatalf("Marshal = %s, %v", m, err)
	}
}

// TestJCSVectors checks the RFC 8785 input/output pairs of
// cyberphone/json-canonicalization byte for byte.
func TestJCSVectors(t *testing.T) {
	dir := filepath.Join(publicVectors(t), "jcs")
	names, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no JCS inputs: %v", err)
	}
	for _, in := range names {
		base := filepath.Base(in)
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, "output", base))
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalBytes(data, DecodeOptions{})
		if err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", base, got, want)
		}
	}
}

// TestES6Numbers checks number serialization against the ES6 vectors, both
// from the binary64 value and from a literal that parses to it.
func TestES6Numbers(t *testing.T) {
	dir := filepath.Join(publicVectors(t), "jcs", "numbers")
	for _, name := range []string{"es6testfile-10k.txt", "es6-discrete-from-verify-numbers-go.txt"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		lines := 0
		for sc.Scan() {
			hexBits, want, ok := strings.Cut(sc.Text(), ",")
			if !ok {
				t.Fatalf("%s: bad line %q", name, sc.Text())
			}
			bits, err := strconv.ParseUint(hexBits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			f64 := math.Float64frombits(bits)
			got, err := Canonical(f64)
			if want == "null" {
				if err == nil {
					t.Errorf("%s: %s serialized as %s, want an error", name, hexBits, got)
				}
				continue
			}
			if err != nil || string(got) != want {
				t.Errorf("%s: %s: got %s (%v), want %s", name, hexBits, got, err, want)
			}
			// The same value arriving as a literal: either accepted with the
			// same bytes, or refused because it is an unsafe integer literal.
			lit, perr := CanonicalBytes([]byte(want), DecodeOptions{})
			if perr == nil && string(lit) != want {
				t.Errorf("%s: literal %s canonicalized to %s", name, want, lit)
			}
			if perr != nil && strings.ContainsAny(want, ".e") {
				t.Errorf("%s: literal %s refused: %v", name, want, perr)
			}
			lines++
		}
		f.Close()
		if lines == 0 {
			t.Fatalf("%s: no lines", name)
		}
	}
}

func TestDigestAndArtifactDigest(t *testing.T) {
	if got := Digest([]byte("")); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Digest(empty) = %s", got)
	}
	v, _ := Parse([]byte(`{"b":1,"a":[2]}`), DecodeOptions{})
	d1, _ := DigestValue(v)
	if d1 != Digest([]byte(`{"a":[2],"b":1}`)) {
		t.Fatalf("DigestValue is not over the JCS bytes")
	}
	manifest := map[string]any{
		"contentHash":    "sha256:" + strings.Repeat("a", 64),
		"artifactDigest": "sha256:" + strings.Repeat("0", 64),
		"nested":         map[string]any{"artifactDigest": "kept"},
	}
	got, err := ArtifactDigest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := Digest([]byte(`{"contentHash":"sha256:` + strings.Repeat("a", 64) + `","nested":{"artifactDigest":"kept"}}`))
	if got != want {
		t.Fatalf("ArtifactDigest = %s, want %s", got, want)
	}
	if _, ok := manifest["artifactDigest"]; !ok {
		t.Fatal("ArtifactDigest modified its input")
	}
	// Changing the top-level artifactDigest does not change the result.
	manifest["artifactDigest"] = "anything"
	if again, _ := ArtifactDigest(manifest); again != got {
		t.Fatal("artifactDigest member influenced its own digest")
	}
}

func TestCanonicalIsIdempotent(t *testing.T) {
	in := `{"z":[1.5e3,{"y":"\u00e9","x":null}],"a":-0.0}`
	once, err := CanonicalBytes([]byte(in), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	twice, err := CanonicalBytes(once, DecodeOptions{})
	if err != nil || string(once) != string(twice) {
		t.Fatalf("not idempotent: %s vs %s (%v)", once, twice, err)
	}
	var back any
	if err := json.Unmarshal(once, &back); err != nil {
		t.Fatalf("canonical bytes are not JSON: %v", err)
	}
}

// TestCompareUTF16: compareUTF16 orders as the strings' UTF-16 code units
// do, across ASCII, the rest of the BMP and supplementary characters.
func TestCompareUTF16(t *testing.T) {
	parts := []string{"", "a", "b", "z", "\x7f", "é", "\u0800", "\ud7ff", "\ue000", "\uffee", "\U00010000", "\U0001F600", "\U0010FFFF"}
	var words []string
	for _, x := range parts {
		for _, y := range parts {
			words = append(words, x+y, "k"+x+y)
		}
	}
	for _, a := range words {
		for _, b := range words {
			want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
			if got := compareUTF16(a, b); (got > 0) != (want > 0) || (got < 0) != (want < 0) {
				t.Fatalf("compareUTF16(%q, %q) = %d, want sign of %d", a, b, got, want)
			}
		}
	}
}
