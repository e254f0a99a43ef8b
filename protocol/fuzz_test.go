package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParse: the strict decoder never panics, never accepts what the
// standard library rejects, and whatever it accepts round-trips: its
// canonical bytes read back give the same canonical bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null],"c":"\u00e9\ud834\udd1e"}`,
		`{"a":1,"a":2}`, `9007199254740992`, `1e400`, `1e-400`, `"\ud800"`,
		`"\uffff"`, "\xef\xbb\xbf{}", `[[[[[]]]]]`, `-0.0e+1`, `{"":{"":[]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, DecodeOptions{MaxDepth: 32})
		if err != nil {
			if CodeOf(err) != CodeProtocolViolation {
				t.Fatalf("error without PROTOCOL_VIOLATION: %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		c1, err := Canonical(v)
		if err != nil {
			t.Fatalf("accepted %q but cannot canonicalize: %v", data, err)
		}
		// Re-read with the standard library: a float literal such as 1e20
		// canonicalizes to an integer literal past 2^53, which Parse refuses.
		dec := json.NewDecoder(bytes.NewReader(c1))
		dec.UseNumber()
		var v2 any
		if err := dec.Decode(&v2); err != nil {
			t.Fatalf("canonical bytes %q are not JSON: %v", c1, err)
		}
		c2, err := Canonical(v2)
		if err != nil || string(c1) != string(c2) {
			t.Fatalf("round trip changed %q to %q (%v)", c1, c2, err)
		}
	})
}
