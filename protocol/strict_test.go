package protocol

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// publicVectors is the folder of public test vectors copied into the
// repository (testdata/vectors/README.md). They are part of the repository,
// so a missing folder is a failure, never a skip.
func publicVectors(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("testdata", "vectors")
	if _, err := os.Stat(filepath.Join(dir, "PROVENANCE.md")); err != nil {
		t.Fatalf("public vectors missing: %v", err)
	}
	return dir
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"object", `{"a":1,"b":[true,false,null]}`, map[string]any{"a": json.Number("1"), "b": []any{true, false, nil}}},
		{"whitespace", " \t\r\n{ \"a\" : \"x\" } \n", map[string]any{"a": "x"}},
		{"scalar top level", `"x"`, "x"},
		{"max safe integer", `9007199254740991`, json.Number("9007199254740991")},
		{"min safe integer", `-9007199254740991`, json.Number("-9007199254740991")},
		{"big float is fine", `1e300`, json.Number("1e300")},
		{"minus zero", `-0`, json.Number("-0")},
		{"tiny but nonzero", `5e-324`, json.Number("5e-324")},
		{"zero with exponent", `0e-999`, json.Number("0e-999")},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9"`, "\"\\/\b\f\n\r\té"},
		{"surrogate pair", `"\ud834\udd1e"`, "\U0001D11E"},
		{"raw supplementary", "\"\U0001D11E\"", "\U0001D11E"},
		{"nul in key", `{"a\u0000b":1}`, map[string]any{"a\x00b": json.Number("1")}},
		{"empty key", `{"":0}`, map[string]any{"": json.Number("0")}},
		{"same name at different depths", `{"a":{"a":1}}`, map[string]any{"a": map[string]any{"a": json.Number("1")}}},
		{"U+2028 raw", "\"\u2028\"", "\u2028"},
		{"empty containers", `[{},[]]`, []any{map[string]any{}, []any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in), DecodeOptions{})
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		pointer string // expected JSON pointer of the problem
		msg     string // substring of the message
	}{
		{"duplicate member", `{"a":1,"a":2}`, "/a", "duplicate"},
		{"duplicate same value", `{"a":1,"a":1}`, "/a", "duplicate"},
		{"duplicate nested", `{"x":[{"b":1,"b":1}]}`, "/x/0/b", "duplicate"},
		{"duplicate after unescape", `{"a":1,"\u0061":2}`, "/a", "duplicate"},
		{"integer too big", `{"n":9007199254740992}`, "/n", "2^53"},
		{"integer too small", `[-9007199254740992]`, "/0", "2^53"},
		{"long integer", `123456789012345678901234567890`, "", "2^53"},
		{"overflow", `{"f":1e400}`, "/f", "overflows"},
		{"negative overflow", `-1e400`, "", "overflows"},
		{"underflow", `{"f":1e-400}`, "/f", "underflows"},
		{"underflow fraction", `2.4e-324`, "", "underflows"},
		{"invalid utf8", "\"\xff\"", "", "UTF-8"},
		{"overlong utf8", "\"\xc0\xaf\"", "", "UTF-8"},
		{"raw surrogate utf8", "\"\xed\xa0\x80\"", "", "UTF-8"},
		{"lone high escaped", `"\ud800"`, "", "surrogate"},
		{"lone low escaped", `"\udc00x"`, "", "surrogate"},
		{"high then non-low", `"\ud800\u0041"`, "", "surrogate"},
		{"noncharacter escaped", `"\uffff"`, "", "noncharacter"},
		{"noncharacter FDD0 raw", "\"\ufdd0\"", "", "noncharacter"},
		{"noncharacter plane 16", "\"\U0010FFFF\"", "", "noncharacter"},
		{"noncharacter in key", `{"\ufffe":1}`, "", "noncharacter"},
		{"bom", "\xef\xbb\xbf{}", "", "byte-order mark"},
		{"trailing comma", `[1,]`, "/1", "invalid character"},
		{"trailing garbage", `{} x`, "", "after the JSON value"},
		{"leading zero", `01`, "", "after the JSON value"},
		{"plus sign", `+1`, "", "invalid character"},
		{"bare dot", `1.`, "", "digit expected"},
		{"bad exponent", `1e`, "", "digit expected"},
		{"NaN", `NaN`, "", "invalid character"},
		{"control char", "\"a\x01\"", "", "control character"},
		{"bad escape", `"\x"`, "", "invalid escape"},
		{"short unicode escape", `"\u12"`, "", "invalid \\u escape"},
		{"single quotes", `{'a':1}`, "", "member name"},
		{"unterminated", `{"a":1`, "", "unterminated"},
		{"empty", ``, "", "end of input"},
		{"too deep", strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat("/0", 64), "nesting deeper"},
		{"nested key in pointer", `{"a/b":{"c~d":1e999}}`, "/a~1b/c~0d", "overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in), DecodeOptions{})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) err = %v, want *Error", tt.in, err)
			}
			if pe.Code != CodeProtocolViolation {
				t.Errorf("code %s, want PROTOCOL_VIOLATION", pe.Code)
			}
			if pe.Pointer != tt.pointer {
				t.Errorf("pointer %q, want %q", pe.Pointer, tt.pointer)
			}
			if !strings.Contains(pe.Message, tt.msg) {
				t.Errorf("message %q does not mention %q", pe.Message, tt.msg)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	doc := []byte(`{"a":"` + strings.Repeat("x", 100) + `"}`)
	if _, err := Parse(doc, DecodeOptions{MaxBytes: 50}); CodeOf(err) != CodeProtocolViolation {
		t.Fatalf("oversize document: err = %v", err)
	}
	if _, err := Parse(doc, DecodeOptions{MaxBytes: len(doc)}); err != nil {
		t.Fatalf("document at the limit: %v", err)
	}
	deep := []byte(strings.Repeat("[", 10) + strings.Repeat("]", 10))
	if _, err := Parse(deep, DecodeOptions{MaxDepth: 9}); CodeOf(err) != CodeProtocolViolation {
		t.Fatalf("depth 10 with limit 9: err = %v", err)
	}
	if _, err := Parse(deep, DecodeOptions{MaxDepth: 10}); err != nil {
		t.Fatalf("depth 10 with limit 10: %v", err)
	}
	// 100,000 nested arrays must fail fast, not exhaust the stack.
	huge := []byte(strings.Repeat("[", 100000))
	if _, err := Parse(huge, DecodeOptions{}); err == nil {
		t.Fatal("100k nesting accepted")
	}
}

// TestJSONTestSuite runs the public nst/JSONTestSuite subset against the
// verdicts its manifest proposes for a strict I-JSON receiver. Our policy on
// the "policy" rows follows docs/wire.md: integer literals beyond ±(2^53−1) and
// nesting past the depth limit are rejected; extra decimal precision that
// binary64 rounds away is not on docs/wire.md's list and is accepted.
func TestJSONTestSuite(t *testing.T) {
	dir := filepath.Join(publicVectors(t), "json-suite")
	f, err := os.Open(filepath.Join(dir, "MANIFEST.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	policy := map[string]bool{ // true = accept
		"test_parsing/i_number_too_big_pos_int.json":      false,
		"test_parsing/i_structure_500_nested_arrays.json": false,
		"test_transform/number_1.000000000000000005.json": true,
		"test_transform/number_10000000000000000999.json": false,
		"test_transform/number_9223372036854775808.json":  false,
		"test_transform/number_-9223372036854775809.json": false,
	}
	n := 0
	for _, row := range rows[1:] {
		path, verdict := row[0], row[2]
		var accept bool
		switch {
		case verdict == "accept":
			accept = true
		case strings.HasPrefix(verdict, "reject"):
			accept = false
		default:
			a, ok := policy[path]
			if !ok {
				t.Errorf("%s: policy row without a decision", path)
				continue
			}
			accept = a
		}
		data, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		_, perr := Parse(data, DecodeOptions{})
		if accept && perr != nil {
			t.Errorf("%s: rejected, want accept: %v", path, perr)
		}
		if !accept && perr == nil {
			t.Errorf("%s: accepted, want reject", path)
		}
		if perr != nil && CodeOf(perr) != CodeProtocolViolation {
			t.Errorf("%s: code %s, want PROTOCOL_VIOLATION", path, CodeOf(perr))
		}
		n++
	}
	if n < 70 {
		t.Fatalf("only %d vectors ran", n)
	}
}
