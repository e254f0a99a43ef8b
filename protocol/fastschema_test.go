package protocol

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The fast accept path (fastschema.go) must agree with the library: it may
// only answer fYes for a document the library accepts and fNo for one it
// rejects. These tests prove it over every fixture, thousands of mutations
// of each and a fuzz target, and check the fast path needs no allocation.

func fastSetT(t testing.TB) *fastSet {
	t.Helper()
	set, err := loadFastSchemas()
	if err != nil {
		t.Fatalf("fast schemas do not compile: %v", err)
	}
	return set
}

// libraryValid is the library's verdict on the normative schema.
func libraryValid(t testing.TB, name string, v any) bool {
	t.Helper()
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	return set.byName[name].Validate(v) == nil
}

var fresName = map[fres]string{fYes: "valid", fNo: "invalid", fUnsure: "unsure"}

// agree checks one document against one schema; unsureOK admits fUnsure
// (the fast path declines, the library decides). It returns the library's
// verdict.
func agree(t testing.TB, set *fastSet, name string, v any, unsureOK bool, what string) bool {
	t.Helper()
	r := set.byName[name].eval(toFval(v), 0)
	lib := libraryValid(t, name, v)
	switch {
	case r == fUnsure && !unsureOK:
		t.Errorf("%s vs %s: fast path undecided (library: valid=%v)\n%.2000s", what, name, lib, fastJSON(v))
	case r != fUnsure && (r == fYes) != lib:
		t.Errorf("%s vs %s: fast path says %s, library valid=%v\n%.2000s", what, name, fresName[r], lib, fastJSON(v))
	}
	return lib
}

func fastJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func TestFastSchemaCompiles(t *testing.T) {
	set := fastSetT(t)
	for _, n := range SchemaNames {
		if set.byName[n] == nil {
			t.Errorf("no fast validator for %s", n)
		}
	}
	// The command dispatch became a table with one then per Command type.
	d := set.byName["command"].dispatch
	if d == nil || d.prop != "type" || len(d.cases) != len(allCommandTypes()) || len(set.byName["command"].allOf) != 0 {
		t.Errorf("command dispatch not folded: %+v", d)
	}
	// So did the event dispatch, with one then per Event type.
	d = set.byName["event"].dispatch
	if d == nil || d.prop != "type" || len(d.cases) != len(allEventTypes()) || len(set.byName["event"].allOf) != 0 {
		t.Errorf("event dispatch not folded: %+v", d)
	}
}

// TestFastSchemaRejectsUnknownKeywords: a keyword (or a form of one) the
// fast validator does not implement fails compilation instead of being
// skipped.
func TestFastSchemaRejectsUnknownKeywords(t *testing.T) {
	const id = "https://example.test/s.schema.json"
	bad := []string{
		`{"format":"date-time"}`, `{"maxLength":3}`, `{"oneOf":[true]}`, `{"uniqueItems":true}`,
		`{"patternProperties":{"a":true}}`, `{"prefixItems":[true]}`, `{"items":[true]}`, `{"$anchor":"a"}`,
		`{"unevaluatedProperties":false}`, `{"maximum":"1"}`, `{"const":{"a":1}}`, `{"enum":[[1]]}`,
		`{"type":"float"}`, `{"$ref":"#foo"}`, `{"$ref":"other.schema.json"}`, `{"properties":{"a":{"maxItems":1}}}`,
		`{"$defs":{"unused":{"contains":true}}}`, `{"$schema":"http://json-schema.org/draft-07/schema#"}`,
		`{"properties":{"a":{"$id":"nested"}}}`, `{"dependencies":{"a":["b"]}}`, `{"multipleOf":2}`, `{"exclusiveMaximum":2}`,
		`{"pattern":"("}`, `{"minItems":-1}`, `{"minLength":1.5}`,
	}
	for _, src := range bad {
		doc := fixture(t, src).(map[string]any)
		doc["$id"] = id
		c := &fastCompiler{docs: map[string]any{id: doc}, nodes: map[string]*fnode{}}
		if _, err := c.at(id, ""); err == nil {
			t.Errorf("%s compiled", src)
		}
	}
	good := `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"t","description":"d",
		"type":["object","null"],"properties":{"a":{"$ref":"#/$defs/x"}},"required":["a"],"additionalProperties":{"type":"string"},
		"$defs":{"x":{"anyOf":[{"const":1},{"enum":["a",null,true,2.5]}],"not":{"minimum":3},"if":{"maximum":1},"then":true,"else":false}},
		"allOf":[{"minProperties":1}],"propertyNames":{"pattern":"^[a-z]+$","minLength":1},"dependentRequired":{"a":["a"]},
		"items":{"exclusiveMinimum":0},"minItems":0}`
	doc := fixture(t, good).(map[string]any)
	doc["$id"] = id
	c := &fastCompiler{docs: map[string]any{id: doc}, nodes: map[string]*fnode{}}
	if _, err := c.at(id, ""); err != nil {
		t.Errorf("supported keywords: %v", err)
	}
}

// TestFastSchemaUnsure: doubt propagates; never through not or if into a
// yes. float64 is a valid Go number to the library but not a Parse value,
// so the fast path declines it.
func TestFastSchemaUnsure(t *testing.T) {
	const id = "https://example.test/u.schema.json"
	tests := []struct {
		schema string
		v      any
		want   fres
	}{
		{`{"not":{"type":"string"}}`, float64(1), fUnsure},
		{`{"not":{"type":"string"}}`, json.Number("1"), fYes},
		{`{"if":{"type":"number"},"then":false,"else":true}`, float64(1), fUnsure},
		{`{"anyOf":[{"type":"string"},{"type":"integer"}]}`, float64(1), fUnsure},
		{`{"anyOf":[{"type":"string"},{"type":"integer"}]}`, json.Number("1.0"), fYes},
		{`{"anyOf":[{"type":"string"},{"type":"integer"}]}`, json.Number("1.5"), fNo},
		{`{"type":"integer"}`, json.Number("1e100001"), fUnsure},
		{`{"not":{"type":"integer"}}`, json.Number("1e100001"), fUnsure},
		{`{"anyOf":[{"type":"integer"},{"type":"string"}]}`, json.Number("1e100001"), fUnsure},
		{`{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"number"}]}`, json.Number("1e100001"), fYes},
		{`{"if":{"type":"integer"},"then":true,"else":true}`, json.Number("1e100001"), fUnsure},
		{`{"not":{"properties":{"a":{"type":"string"}}}}`, map[string]any{"a": 1.5}, fUnsure},
		{`{"type":"integer"}`, json.Number("1e99999"), fYes},
		{`{"type":"integer"}`, json.Number("12e-1"), fNo},
		{`{"type":"integer"}`, json.Number("x"), fUnsure},
		{`{"type":"number"}`, json.Number("x"), fYes}, // the library only looks at the Go type
		{`{"minimum":0}`, json.Number("x"), fUnsure},
		{`true`, make(chan int), fYes},
		{`false`, json.Number("1"), fNo},
		{`{}`, make(chan int), fUnsure},
		{`{"properties":{"a":{"type":"string"}}}`, map[string]any{"a": []string{"x"}}, fUnsure},
		{`{"allOf":[{"if":{"properties":{"t":{"const":"a"}},"required":["t"]},"then":{"required":["x"]}}]}`, map[string]any{"t": 1.5}, fUnsure},
		{`{"allOf":[{"if":{"properties":{"t":{"const":"a"}},"required":["t"]},"then":{"required":["x"]}}]}`, map[string]any{"t": "a"}, fNo},
		{`{"allOf":[{"if":{"properties":{"t":{"const":"a"}},"required":["t"]},"then":{"required":["x"]}}]}`, map[string]any{"t": "b"}, fYes},
		{`{"allOf":[{"if":{"properties":{"t":{"const":"a"}},"required":["t"]},"then":{"type":"object"}}]}`, "str", fNo},
	}
	for i, tc := range tests {
		var doc any = fixture(t, tc.schema)
		if m, ok := doc.(map[string]any); ok {
			m["$id"] = id
		}
		c := &fastCompiler{docs: map[string]any{id: doc}, nodes: map[string]*fnode{}}
		n, err := c.at(id, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := n.eval(toFval(tc.v), 0); got != tc.want {
			t.Errorf("%d: %s on %#v: got %s, want %s", i, tc.schema, tc.v, fresName[got], fresName[tc.want])
		}
	}
}

var jsonNumberGrammar = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// TestFastDecimal compares the exact decimal reading with big.Rat, which
// the library uses, on boundary literals and random ones.
func TestFastDecimal(t *testing.T) {
	lits := []string{
		"0", "-0", "0.0", "-0.0", "0e5", "0E-5", "1", "-1", "1.0", "1.5", "-1.5", "1e2", "1E+2", "1e-2", "10e-1", "100e-2",
		"9007199254740991", "9007199254740992", "9007199254740991.0", "9007199254740991e0", "90071992547409910e-1",
		"9007199254740990.9999999999", "9007199254740991.0000000001", "0.5", "0.05", "5e-1", "50e-2", "123.456e3",
		"123.4567e3", "1e308", "1.7976931348623157e308", "4.9e-324", "-9007199254740991", "0.000001", "1e-7",
		"00", "01", "1.", ".5", "+1", "1e", "1e+", "--1", "", "-", "0x10", "1_000", "Infinity", "NaN", "1e100001",
	}
	handPicked := 0
	for _, s := range lits {
		if _, ok := parseDec(s); ok {
			handPicked++ // all of them are compared pairwise
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		if rng.IntN(3) == 0 {
			b.WriteByte('-')
		}
		if rng.IntN(4) == 0 {
			b.WriteByte('0')
		} else {
			b.WriteByte(byte('1' + rng.IntN(9)))
			for range rng.IntN(20) {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		if rng.IntN(2) == 0 {
			b.WriteByte('.')
			for range 1 + rng.IntN(20) {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		if rng.IntN(2) == 0 {
			b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[rng.IntN(5)])
			b.WriteString(strconv.Itoa(rng.IntN(40)))
		}
		lits = append(lits, b.String())
	}
	var decs []fdec
	var rats []*big.Rat
	for _, s := range lits {
		d, ok := parseDec(s)
		if s == "1e100001" {
			if ok {
				t.Errorf("%s: beyond the exponent bound, want ok=false", s)
			}
			continue
		}
		if want := jsonNumberGrammar.MatchString(s); ok != want {
			t.Errorf("%q: parseDec ok=%v, JSON number grammar %v", s, ok, want)
		}
		if !ok {
			continue
		}
		r, rok := new(big.Rat).SetString(s)
		if !rok {
			t.Fatalf("%q: big.Rat refuses it", s)
		}
		if d.isInt() != r.IsInt() {
			t.Errorf("%q: isInt=%v, big.Rat %v", s, d.isInt(), r.IsInt())
		}
		decs = append(decs, d)
		rats = append(rats, r)
	}
	for i := range decs {
		js := []int{i, (i + 1) % len(decs), rng.IntN(len(decs)), rng.IntN(len(decs))}
		if i < handPicked {
			js = js[:0]
			for j := range handPicked {
				js = append(js, j)
			}
		}
		for _, j := range js {
			if got, want := decs[i].cmp(&decs[j]), rats[i].Cmp(rats[j]); got != want {
				t.Errorf("cmp(%s, %s) = %d, big.Rat %d", rats[i].RatString(), rats[j].RatString(), got, want)
			}
		}
	}
}

// fastDoc is a document under test; schema is "" when it is to be checked
// against every schema.
type fastDoc struct {
	what, schema string
	v            any
}

// fastCorpus gathers every fixture and example of schema_test.go,
// types_examples_test.go and testdata/conformance.
func fastCorpus(t testing.TB) []fastDoc {
	var docs []fastDoc
	for name, src := range schemaExamples {
		docs = append(docs, fastDoc{"schemaExamples/" + name, name, fixture(t, src)})
	}
	for name, src := range schemaFixtures {
		docs = append(docs, fastDoc{"schemaFixtures/" + name, "", fixture(t, src)})
	}
	for _, typ := range allCommandTypes() {
		c := commandWith(t, typ, payloadExamples[typ])
		docs = append(docs,
			fastDoc{"payloadExamples/" + string(typ), "command", c},
			fastDoc{"payloadExamples/frame/" + string(typ), "websocket-frame", map[string]any{"type": "COMMAND", "frameId": "f1", "command": c}},
			fastDoc{"payloadExamples/payload/" + string(typ), "", fixture(t, payloadExamples[typ])})
	}
	for _, typ := range allEventTypes() {
		ex := eventExamples[typ]
		ev := eventWith(t, typ, ex.payload)
		// Frames around them add little: the frame schema refers to the
		// event schema, and the conformance vectors hold EVENT frames.
		docs = append(docs,
			fastDoc{"eventExamples/" + string(typ), "event", ev},
			fastDoc{"eventExamples/negative/" + string(typ), "", mutate(t, ev, "/payload"+ex.pointer, ex.value)})
	}
	reparse := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Parse(b, DecodeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return doc
	}
	for _, ex := range typesObjectExamples() {
		docs = append(docs, fastDoc{"typesObjectExamples/" + ex.name, "", reparse(ex.value)})
	}
	for typ, p := range typesPayloadExamples() {
		c := typesCommand()
		c.Type = typ
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		c.Payload = raw
		docs = append(docs, fastDoc{"typesPayloadExamples/" + string(typ), "", reparse(c)})
	}
	files, _ := filepath.Glob("testdata/conformance/*/*.json")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Parse(data, DecodeOptions{})
		if err != nil {
			continue // byte-level vectors: Parse rejects them before any schema
		}
		docs = append(docs, fastDoc{f, "", v})
	}
	return docs
}

// TestFastSchemaDifferential: every document of the corpus against every
// schema, with its own schema it must be valid (fast path included).
func TestFastSchemaDifferential(t *testing.T) {
	set := fastSetT(t)
	docs := fastCorpus(t)
	valid, pairs := 0, 0
	for _, d := range docs {
		for _, name := range SchemaNames {
			pairs++
			lib := agree(t, set, name, d.v, false, d.what)
			if lib {
				valid++
			}
			if name == d.schema && !lib {
				t.Errorf("%s: example is invalid against %s", d.what, name)
			}
		}
	}
	t.Logf("%d documents, %d (document, schema) pairs, %d valid", len(docs), pairs, valid)
	if len(docs) < 150 {
		t.Errorf("corpus has only %d documents", len(docs))
	}
}

// fastMutationsPerSeed is how many mutants each valid (document, schema)
// pair gets: 200, 40 under -race, 20 with -short (the library is the slow
// side); MWP_FASTSCHEMA_MUTATIONS overrides it, e.g. 3000 for a deep run.
func fastMutationsPerSeed(t testing.TB) int {
	if s := os.Getenv("MWP_FASTSCHEMA_MUTATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("MWP_FASTSCHEMA_MUTATIONS: %v", err)
		}
		return n
	}
	if testing.Short() {
		return 20
	}
	if fastRaceEnabled() {
		return 40
	}
	return 200
}

func fastRaceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return true
			}
		}
	}
	return false
}

// fastMutator makes deterministic random mutants of valid documents.
type fastMutator struct {
	rng     *rand.Rand
	strs    []string // every const and enum string of the schemas, and bad ones
	types   []string // Command, Event and frame types, and near misses
	donors  []any    // subtrees to splice in
	numbers []string
}

func newFastMutator(t testing.TB, seeds []fastDoc) *fastMutator {
	m := &fastMutator{rng: rand.New(rand.NewPCG(0x5eed, 0xfa57))}
	seen := map[string]bool{}
	var bounds []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			m.strs = append(m.strs, s)
		}
	}
	err := fs.WalkDir(schemaFiles, "schemas", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := schemaFiles.ReadFile(p)
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			return err
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if s, ok := c.(string); ok && k == "const" {
						add(s)
					}
					if n, ok := c.(float64); ok && (k == "minimum" || k == "maximum" || k == "exclusiveMinimum") {
						bounds = append(bounds, strconv.FormatFloat(n, 'f', -1, 64))
					}
					if list, ok := c.([]any); ok && k == "enum" {
						for _, e := range list {
							if s, ok := e.(string); ok {
								add(s)
							}
						}
					}
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		walk(doc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m.strs)
	for _, s := range m.strs {
		if strings.Contains(s, ".") || strings.ToUpper(s) == s {
			m.types = append(m.types, s)
		}
	}
	m.types = append(m.types, "ext.acme.review.request", "ext.acme.review.requested", "ext.Acme.x.y", "ext.acme",
		"work.explode", "command", "Command", "mission.create ", "MISSION.CREATE", "")
	for _, s := range []string{"", " ", "a", "-bad", "_a", "a b", "é", "日本", "sha256:xyz", "sha256:" + strings.Repeat("A", 64),
		"sha256:" + strings.Repeat("0", 64), "2026-11-30T08:00:00Z", "2026-11-30T08:00:00.1234Z", "2026-11-30T24:00:00Z",
		"2026-11-30T08:00:00+01:00", "urn:acme:x", "https://a.example/x", "not a uri", "1.4.0", "01.0.0", "text/plain",
		"agent:w1#k1", strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("s", 85) + "A",
		strings.Repeat("s", 85) + "B", strings.Repeat("k", 42) + "A", "n0nce-n0nce-n0nce", "short", "0.1", "0.2", "\x00", "a\nb"} {
		add(s)
	}
	m.numbers = []string{"0", "-0", "-1", "1", "2", "9007199254740991", "9007199254740992", "-9007199254740991",
		"1.5", "0.5", "1e2", "1.0", "1E0", "10e-1", "0.0", "-0.0", "1e-7", "1e400", "-1e400", "1e-400",
		"9007199254740991.0", "9007199254740990.5", "90071992547409910e-1", "2.5e0", "0e10"}
	for _, b := range bounds {
		m.numbers = append(m.numbers, b, b+".0", b+"e0", b+".5", b+".0000000001", "-"+b, b+"1", b[:len(b)-1])
		if d, ok := parseDec(b); ok && len(d.a) > 0 {
			m.numbers = append(m.numbers, "0."+strings.Repeat("0", 3)+"1", "9"+strings.Repeat("0", len(d.a)))
		}
	}
	m.numbers = slices.DeleteFunc(m.numbers, func(s string) bool { return !jsonNumberGrammar.MatchString(s) })
	for _, s := range seeds {
		fastWalk(s.v, nil, func(ptr []string, v any) { m.donors = append(m.donors, v) })
	}
	return m
}

// fastWalk calls fn for every value of v with its path.
func fastWalk(v any, ptr []string, fn func(ptr []string, v any)) {
	fn(ptr, v)
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic
		for _, k := range keys {
			fastWalk(x[k], append(slices.Clip(ptr), k), fn)
		}
	case []any:
		for i, c := range x {
			fastWalk(c, append(slices.Clip(ptr), strconv.Itoa(i)), fn)
		}
	}
}

func fastCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, c := range x {
			m[k] = fastCopy(c)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, c := range x {
			a[i] = fastCopy(c)
		}
		return a
	}
	return v
}

func (m *fastMutator) pick(list []string) string { return list[m.rng.IntN(len(list))] }

func (m *fastMutator) value() any {
	switch m.rng.IntN(10) {
	case 0:
		return nil
	case 1:
		return m.rng.IntN(2) == 0
	case 2:
		return json.Number(m.pick(m.numbers))
	case 3:
		return m.pick(m.strs)
	case 4:
		return map[string]any{}
	case 5:
		return []any{}
	case 6:
		return []any{m.pick(m.strs)}
	case 7:
		return map[string]any{"a": json.Number("1")}
	}
	return fastCopy(m.donors[m.rng.IntN(len(m.donors))])
}

// mutate applies one random edit to doc (a copy) and returns the result
// with a short description.
func (m *fastMutator) mutate(doc any) (any, string) {
	var paths [][]string
	fastWalk(doc, nil, func(ptr []string, v any) { paths = append(paths, ptr) })
	op := m.rng.IntN(14)
	// Most edits go to a value of the kind they change.
	want := map[int]func(any) bool{
		4:  func(v any) bool { _, ok := v.(json.Number); return ok },
		7:  func(v any) bool { _, ok := v.(string); return ok },
		9:  func(v any) bool { _, ok := v.([]any); return ok },
		12: func(v any) bool { _, ok := v.(map[string]any); return ok },
	}[op]
	var ptr []string
	if want != nil {
		var fit [][]string
		for _, p := range paths {
			if v, _ := valueAt(doc, p); want(v) {
				fit = append(fit, p)
			}
		}
		if len(fit) > 0 {
			ptr = fit[m.rng.IntN(len(fit))]
		}
	}
	if ptr == nil {
		ptr = paths[m.rng.IntN(len(paths))]
	}
	cur, _ := valueAt(doc, ptr)
	set := func(nv any) any {
		if len(ptr) == 0 {
			return nv
		}
		parent, _ := valueAt(doc, ptr[:len(ptr)-1])
		last := ptr[len(ptr)-1]
		switch p := parent.(type) {
		case map[string]any:
			p[last] = nv
		case []any:
			i, _ := strconv.Atoi(last)
			p[i] = nv
		}
		return doc
	}
	where := "/" + strings.Join(ptr, "/")
	switch {
	case op == 0 && len(ptr) > 0: // delete a member or an element
		parent, _ := valueAt(doc, ptr[:len(ptr)-1])
		last := ptr[len(ptr)-1]
		switch p := parent.(type) {
		case map[string]any:
			delete(p, last)
		case []any:
			i, _ := strconv.Atoi(last)
			return fastSetAt(doc, ptr[:len(ptr)-1], slices.Delete(slices.Clone(p), i, i+1)), "delete " + where
		}
		return doc, "delete " + where
	case op == 1: // add an unknown member, or a known name from elsewhere
		if obj, ok := cur.(map[string]any); ok {
			name := "zzUnknown"
			if m.rng.IntN(2) == 0 {
				p := paths[m.rng.IntN(len(paths))]
				if len(p) > 0 {
					name = p[len(p)-1]
				}
			}
			obj[name] = m.value()
			return doc, "add " + where + "/" + name
		}
		return set(m.value()), "replace " + where
	case op == 2 || op == 3: // change the value's type
		return set(m.value()), "retype " + where
	case op == 4: // boundary numbers
		return set(json.Number(m.pick(m.numbers))), "number " + where
	case op == 5 || op == 6: // strings: schema constants and bad forms
		return set(m.pick(m.strs)), "string " + where
	case op == 7: // edit a string in place
		if s, ok := cur.(string); ok && s != "" {
			i := m.rng.IntN(len(s))
			switch m.rng.IntN(4) {
			case 0:
				s = s[:i] + s[i+1:]
			case 1:
				s = s[:i] + string("!Z_9 .-é"[m.rng.IntN(8)]) + s[i:]
			case 2:
				s = strings.ToUpper(s)
			default:
				s += s
			}
			return set(s), "edit " + where
		}
		return set(m.pick(m.strs)), "string " + where
	case op == 8: // the type of a command, event or frame
		var objs [][]string
		for _, p := range paths {
			if v, _ := valueAt(doc, p); v != nil {
				if o, ok := v.(map[string]any); ok && o["type"] != nil {
					objs = append(objs, p)
				}
			}
		}
		if len(objs) > 0 {
			p := objs[m.rng.IntN(len(objs))]
			o, _ := valueAt(doc, p)
			o.(map[string]any)["type"] = m.pick(m.types)
			return doc, "type /" + strings.Join(p, "/")
		}
		return set(m.pick(m.types)), "type " + where
	case op == 9: // arrays: empty, duplicate, append
		if a, ok := cur.([]any); ok {
			switch {
			case len(a) > 0 && m.rng.IntN(2) == 0:
				return set(append(slices.Clone(a), fastCopy(a[0]))), "dup " + where
			case m.rng.IntN(2) == 0:
				return set([]any{}), "empty " + where
			}
			return set(append(slices.Clone(a), m.value())), "append " + where
		}
		return set(m.value()), "replace " + where
	case op == 12: // objects: empty, or keep one member
		if obj, ok := cur.(map[string]any); ok && len(obj) > 0 && m.rng.IntN(2) == 0 {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			k := keys[m.rng.IntN(len(keys))]
			return set(map[string]any{k: obj[k]}), "keep " + where + "/" + k
		}
		return set(map[string]any{}), "empty " + where
	case op == 10: // splice a subtree of another document
		return set(fastCopy(m.donors[m.rng.IntN(len(m.donors))])), "splice " + where
	default: // swap an enum or const value for another schema constant
		if _, ok := cur.(string); ok {
			return set(m.pick(m.strs)), "swap " + where
		}
		return set(m.value()), "replace " + where
	}
}

func fastSetAt(doc any, ptr []string, nv any) any {
	if len(ptr) == 0 {
		return nv
	}
	parent, _ := valueAt(doc, ptr[:len(ptr)-1])
	last := ptr[len(ptr)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = nv
	case []any:
		i, _ := strconv.Atoi(last)
		p[i] = nv
	}
	return doc
}

// TestFastSchemaMutations: for each valid (document, schema) pair of the
// corpus, deterministic random mutants (one to three edits each) get the
// same verdict from the fast path as from the library, never "unsure".
func TestFastSchemaMutations(t *testing.T) {
	set := fastSetT(t)
	var seeds []fastDoc
	for _, d := range fastCorpus(t) {
		for _, name := range SchemaNames {
			if name != "common" && (d.schema == "" || d.schema == name) && libraryValid(t, name, d.v) {
				seeds = append(seeds, fastDoc{d.what, name, d.v})
			}
		}
	}
	per := fastMutationsPerSeed(t)
	m := newFastMutator(t, seeds)
	total, accepted := 0, 0
	for _, s := range seeds {
		for i := 0; i < per; i++ {
			doc := fastCopy(s.v)
			var what []string
			for range 1 + m.rng.IntN(3) {
				var w string
				doc, w = m.mutate(doc)
				what = append(what, w)
			}
			total++
			if agree(t, set, s.schema, doc, false, s.what+" ["+strings.Join(what, ", ")+"]") {
				accepted++
			}
			if t.Failed() && total%per == 0 {
				return
			}
		}
	}
	t.Logf("%d seeds × %d mutants: %d mutants, %d still valid", len(seeds), per, total, accepted)
	if len(seeds) < 100 || accepted == 0 || accepted == total {
		t.Errorf("weak mutation corpus: %d seeds, %d of %d mutants valid", len(seeds), accepted, total)
	}
}

// TestFastSchemaNumberSweep sets every number of every valid example, in
// turn, to each boundary value of the schemas (0, 1, 2, 2^53-1 and their
// neighbours, fractions and exponent forms): minimum, maximum,
// exclusiveMinimum and integer are decided exactly as big.Rat does.
func TestFastSchemaNumberSweep(t *testing.T) {
	set := fastSetT(t)
	values := []string{"0", "-0", "0.0", "0e0", "-1", "1", "1.0", "10e-1", "1.5", "0.5", "0.0000000001", "-0.0000000001",
		"2", "1.9999999999", "9007199254740991", "9007199254740991.0", "9007199254740991.0000000001",
		"9007199254740990.9999999999", "9007199254740992", "90071992547409910e-1", "1e2", "1e-7"}
	checked := 0
	for name, src := range schemaExamples {
		doc := fixture(t, src)
		var paths [][]string
		fastWalk(doc, nil, func(ptr []string, v any) {
			if _, ok := v.(json.Number); ok {
				paths = append(paths, ptr)
			}
		})
		for _, p := range paths {
			for _, num := range values {
				cp := fastSetAt(fastCopy(doc), p, json.Number(num))
				agree(t, set, name, cp, false, fmt.Sprintf("%s /%s=%s", name, strings.Join(p, "/"), num))
				checked++
			}
		}
	}
	t.Logf("%d documents checked", checked)
}

// TestFastSchemaValidate: Validate answers nil exactly when the library
// does, and on invalid documents returns the library's full report (the
// fast path is not consulted for problems).
func TestFastSchemaValidate(t *testing.T) {
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range fastCorpus(t) {
		for _, name := range []string{"command", "websocket-frame", "event", "work-item"} {
			got := Validate(name, d.v)
			var want error
			if sp, ok := set.split[name]; ok {
				want = set.checkSplit(name, sp, d.v)
			} else {
				want = set.check(name, set.byName[name], d.v)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s vs %s: Validate %v, library %v", d.what, name, got, want)
			}
		}
	}
}

func TestFastSchemaNoAllocs(t *testing.T) {
	withOffline := mutate(t, fixture(t, "{{command}}"), "/extensions",
		`{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`)
	docs := map[string]any{
		"command":         withOffline,
		"websocket-frame": map[string]any{"type": "COMMAND", "frameId": "f1", "command": withOffline},
		"group-snapshot":  fixture(t, "{{snapshot}}"),
		"event":           eventWith(t, EvtWorkOfferCreated, eventExamples[EvtWorkOfferCreated].payload),
	}
	for name, doc := range docs {
		if !fastAccepts(name, doc) {
			t.Fatalf("%s: not accepted", name)
		}
		if fastRaceEnabled() {
			continue // sync.Pool (regexp's machines) drops items under -race
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := Validate(name, doc); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per Validate", name, n)
		}
	}
}

// FuzzFastSchemaAgrees: any document Parse accepts gets, from the fast
// path, either no decision or the library's verdict, for every schema.
func FuzzFastSchemaAgrees(f *testing.F) {
	for _, d := range fastCorpus(f) {
		if b, err := json.Marshal(d.v); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	for _, s := range []string{`{}`, `[]`, `null`, `1`, `"x"`, `{"type":"COMMAND"}`, `{"type":"work.start","payload":{}}`,
		`{"money":1e400}`, `{"sessionEpoch":1.0}`, `{"a":1e-7}`} {
		f.Add([]byte(s))
	}
	set := fastSetT(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, DecodeOptions{})
		if err != nil {
			return
		}
		for _, name := range SchemaNames {
			agree(t, set, name, v, true, "fuzz")
		}
	})
}
