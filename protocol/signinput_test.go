package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/gowebpki/jcs"
)

// checkLayout holds appendSigned's one pass to separate writes of each
// part: the signing input to gowebpki/jcs over the document without
// signature.value, and the spliced document, the payload and each
// extension's data to Canonical of those values.
func checkLayout(t *testing.T, doc map[string]any) {
	t.Helper()
	sig, ok := doc["signature"].(map[string]any)
	if !ok {
		return
	}
	var lay signedLayout
	input, err := appendSigned(nil, doc, sig, &lay)
	if err != nil {
		return
	}
	noValue := make(map[string]any, len(doc))
	for k, v := range doc {
		noValue[k] = v
	}
	s := make(map[string]any, len(sig))
	for k, v := range sig {
		if k != "value" {
			s[k] = v
		}
	}
	noValue["signature"] = s
	if raw, err := json.Marshal(noValue); err == nil {
		if want, err := jcs.Transform(raw); err == nil && !bytes.Equal(input, want) {
			t.Fatalf("signing input\n got %s\nwant %s", input, want)
		}
	}
	if v, ok := sig["value"].(string); ok {
		want, err := Canonical(doc)
		if err != nil {
			t.Fatalf("the input was written but the document has no canonical form: %v", err)
		}
		if got := appendSignedValue(nil, input, &lay, v); !bytes.Equal(got, want) {
			t.Fatalf("spliced document\n got %s\nwant %s", got, want)
		}
	}
	if p, ok := doc["payload"]; ok {
		want, _ := Canonical(p)
		if got := input[lay.payload.start:lay.payload.end]; !bytes.Equal(got, want) {
			t.Fatalf("payload span %s, want %s", got, want)
		}
	}
	exts, _ := doc["extensions"].(map[string]any)
	for uri, e := range exts {
		em, _ := e.(map[string]any)
		d, ok := em["data"]
		if !ok {
			continue
		}
		sp, found := lay.extData(uri)
		want, _ := Canonical(d)
		if !found || !bytes.Equal(input[sp.start:sp.end], want) {
			t.Fatalf("extension %s data span %v %s, want %s", uri, found, input[sp.start:sp.end], want)
		}
	}
}

// FuzzSignedLayout: see checkLayout; Canonical itself stays byte for byte
// what gowebpki/jcs writes.
func FuzzSignedLayout(f *testing.F) {
	_, signed := signedCommandText(f)
	for _, s := range []string{
		string(signed), `{"signature":{}}`, `{"signature":{"value":"x"}}`,
		`{"z":1,"signature":{"value":"v","alg":"a"},"payload":{"b":[1,2e3,"\u00e9"],"a":null}}`,
		`{"extensions":{"u:b":{"data":{"y":1,"x":2},"critical":true},"u:a":{"critical":false},"u:c":7},"signature":{"keyId":"k","value":"v"}}`,
		`{"\ud83d\ude00":1,"\uffee":2,"signature":{"alg":"<&>","value":"v"},"payload":-0}`,
		`{"signature":{"x00":"000","value":"0"}}`, `{"signature":{"zz":1,"alg":"a","value":"v"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, DecodeOptions{MaxDepth: 32})
		if err != nil {
			return
		}
		if c, err := Canonical(v); err == nil {
			if want, jerr := jcs.Transform(data); jerr == nil && !bytes.Equal(c, want) {
				t.Fatalf("Canonical\n got %s\nwant %s", c, want)
			}
		}
		if doc, ok := v.(map[string]any); ok {
			checkLayout(t, doc)
		}
		checkRawLayout(t, data)
	})
}

// TestInboundCommandReusesInput: a decoded Command's canonical bytes,
// payload and extension data are the canonical bytes of the parsed values.
func TestInboundCommandReusesInput(t *testing.T) {
	for _, m := range [][][2]string{
		nil,
		{{"/extensions", `{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`}},
		{{"/extensions", `{"urn:example:x":{"critical":false,"data":{"b":1,"a":[2e0,"<"]}},"urn:example:a":{"critical":false,"data":null}}`}},
	} {
		raw, keys := signedFixture(t, m...)
		in := &Inbound{Keys: keys}
		ic, err := in.DecodeCommand(raw, inboundNow)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ic.CanonicalBytes()
		want, _ := Canonical(ic.Value)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("CanonicalBytes\n got %s\nwant %s (%v)", got, want, err)
		}
		if want, _ := Canonical(ic.Value["payload"]); !bytes.Equal(ic.Command.Payload, want) {
			t.Fatalf("payload %s, want %s", ic.Command.Payload, want)
		}
		exts, _ := ic.Value["extensions"].(map[string]any)
		for uri, e := range exts {
			want, _ := Canonical(e.(map[string]any)["data"])
			if got := ic.Command.Extensions[uri].Data; !bytes.Equal(got, want) {
				t.Fatalf("extension %s data %s, want %s", uri, got, want)
			}
		}
		checkLayout(t, ic.Value)
	}
}

// checkRawLayout holds parse's notes to the general path: a text noted
// canonical is Canonical of its value, canonical bytes are noted so, and
// the signing input and layout cut from the text are appendSigned's.
func checkRawLayout(t *testing.T, data []byte) {
	t.Helper()
	var raw rawLayout
	v, err := parse(data, DecodeOptions{MaxDepth: 32}, &raw)
	if err != nil {
		return
	}
	c, cerr := Canonical(v)
	if raw.canonical && (cerr != nil || !bytes.Equal(c, data)) {
		t.Fatalf("noted canonical: %s\ncanonical form: %s (%v)", data, c, cerr)
	}
	if cerr == nil && !raw.canonical {
		var again rawLayout
		if _, err := parse(c, DecodeOptions{MaxDepth: 32}, &again); err == nil && !again.canonical {
			t.Fatalf("canonical bytes not noted canonical: %s", c)
		}
	}
	doc, _ := v.(map[string]any)
	sig, ok := doc["signature"].(map[string]any)
	if _, isStr := sig["value"].(string); !ok || !isStr || !raw.canonical {
		return
	}
	var want, got signedLayout
	in, err := appendSigned(nil, doc, sig, &want)
	if err != nil {
		t.Fatalf("canonical text without a signing input: %v", err)
	}
	if out := raw.signingInput(nil, data, doc, &got); !bytes.Equal(out, in) {
		t.Fatalf("signing input cut from the text\n got %s\nwant %s", out, in)
	}
	if got.cut != want.cut || got.sigFirst != want.sigFirst || got.sigAfter != want.sigAfter ||
		got.payload != want.payload || !slices.Equal(got.exts, want.exts) {
		t.Fatalf("layout cut from the text %+v, want %+v", got, want)
	}
}

// TestRawLayout: see checkRawLayout, over texts canonical and not.
func TestRawLayout(t *testing.T) {
	_, signed := signedCommandText(t)
	for _, s := range []string{
		string(signed), `{"signature":{"value":"x"}}`, `{"signature":{"value":"x","zz":1}}`,
		`{"a":1,"signature":{"alg":"a","value":"v","zz":[]},"z":2}`,
		`{"extensions":{"u:a":{"critical":false},"u:b":{"critical":true,"data":{"x":2,"y":1}},"u:c":7},"payload":[1,"é",null],"signature":{"keyId":"k","value":"v"}}`,
		`{"extensions":[{"data":1}],"signature":{"value":"v"}}`,
		`{"payload":1.5,"signature":{"value":"v"}}`, `{"payload":1.50,"signature":{"value":"v"}}`,
		`{"payload":-0,"signature":{"value":"v"}}`, `{"payload":1e2,"signature":{"value":"v"}}`,
		`{"payload":9007199254740991,"signature":{"value":"v"}}`, `{"payload":"\n","signature":{"value":"v"}}`,
		`{"payload":"\u000a","signature":{"value":"v"}}`, `{"payload":"\u00e9","signature":{"value":"v"}}`,
		`{"b":1,"a":2,"signature":{"value":"v"}}`, `{ "signature":{"value":"v"}}`, `{"signature":{"value":"v"} }`,
		`{"\ud83d\ude00":1,"\uffee":2,"signature":{"value":"v"}}`, "{\"\uffee\":2,\"\U0001F600\":1,\"signature\":{\"value\":\"v\"}}",
		"{\"\U0001F600\":1,\"\uffee\":2,\"signature\":{\"value\":\"v\"}}", `[{"signature":{"value":"v"}}]`,
		`{"signature":{"alg":"a","value":"v"},"signatures":{"value":"w"}}`,
	} {
		checkRawLayout(t, []byte(s))
	}
}
