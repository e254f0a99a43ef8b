package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast accept path. Validating a command with jsonschema costs tens of
// microseconds and hundreds of allocations, most of it bookkeeping for error
// reports that a valid document never needs. fastAccepts compiles the same
// embedded schema files into a small tree of fnodes that only decides
// "certainly valid" with no allocation; Validate returns nil when it does,
// and otherwise runs the library exactly as before, so every reported
// problem is the library's.
//
// Evaluation is three-valued: fYes and fNo are certain, fUnsure means the
// fast path cannot decide (a Go value of a kind Parse never produces, a
// number too large to compare cheaply, nesting too deep). Only a certain
// fYes at the root accepts; fUnsure propagates through not and if so a
// doubt is never turned into an acceptance.
//
// Only the keywords the schemas use are supported; compiling a schema with
// any other keyword fails (TestFastSchemaCompiles), and Validate then always
// takes the library path.

type fres int8

const (
	fNo fres = iota
	fYes
	fUnsure
)

// Instance kinds, also the bits of fnode.types.
const (
	tNull uint8 = 1 << iota
	tBool
	tObject
	tArray
	tString
	tNumber
	tInteger // only in fnode.types: a number whose value is an integer
)

// fastMaxDepth bounds schema recursion; deeper is fUnsure (Parse limits
// documents to 64 levels, and every level costs at most a few schema hops).
const fastMaxDepth = 512

// fastNumberDigits and fastNumberExp bound the numbers compared exactly
// here: big.Rat (the library) refuses exponents beyond 1e6, so anything
// near that is left to it.
const (
	fastNumberDigits = 10000
	fastNumberExp    = 100000
)

// fval is an instance value, unboxed once per node so strings (member names
// for propertyNames) need no interface allocation.
type fval struct {
	kind uint8 // 0: a Go value Parse never produces
	b    bool
	s    string // string, or number text
	obj  map[string]any
	arr  []any
}

func toFval(v any) fval {
	switch x := v.(type) {
	case nil:
		return fval{kind: tNull}
	case bool:
		return fval{kind: tBool, b: x}
	case string:
		return fval{kind: tString, s: x}
	case json.Number:
		return fval{kind: tNumber, s: string(x)}
	case map[string]any:
		return fval{kind: tObject, obj: x}
	case []any:
		return fval{kind: tArray, arr: x}
	}
	return fval{}
}

// fconst is a const or enum value: a string, boolean, null or number.
type fconst struct {
	kind uint8
	b    bool
	s    string
	d    fdec
}

func (c *fconst) match(v fval) fres {
	if v.kind != c.kind {
		return fNo
	}
	switch c.kind {
	case tString:
		if v.s == c.s {
			return fYes
		}
		return fNo
	case tBool:
		if v.b == c.b {
			return fYes
		}
		return fNo
	case tNumber:
		d, ok := parseDec(v.s)
		if !ok {
			return fUnsure
		}
		if d.cmp(&c.d) == 0 {
			return fYes
		}
		return fNo
	}
	return fYes // null
}

type fdep struct {
	prop string
	reqd []string
}

// fdispatch is an allOf of if/then pairs whose if is exactly
// {"properties":{P:{"const":C}},"required":[P]} with a string C and no
// else: the then of C applies when the member P is the string C. On a
// non-object every if holds (properties and required ignore non-objects),
// so every then applies.
type fdispatch struct {
	prop  string
	cases map[string][]*fnode
	all   []*fnode
}

// fprop is a properties entry; required: the name is also in required.
type fprop struct {
	node     *fnode
	required bool
}

type fnode struct {
	loc     string
	boolean int8 // 1: the schema true, -1: false, 0: an object schema

	types    uint8
	hasConst bool
	constV   fconst
	enum     []fconst
	enumStr  map[string]struct{} // enum of strings only
	ref      *fnode

	objKw    bool // any object keyword below
	props    map[string]fprop
	required []string
	// required split: those with a properties entry are counted while the
	// members are checked; the others are looked up.
	requiredProps int
	requiredOther []string
	noAdditional  bool
	additional    *fnode
	minProps      int
	propNames     *fnode
	depRequired   []fdep

	arrKw    bool
	items    *fnode
	minItems int

	strKw     bool
	minLength int
	pattern   func(string) bool

	numKw                   bool
	minimum, maximum, exMin *fdec

	dispatch   *fdispatch
	allOf      []*fnode
	anyOf      []*fnode
	not        *fnode
	ifN, thenN *fnode
	elseN      *fnode
}

func (n *fnode) eval(v fval, depth int) fres {
	if n.boolean != 0 {
		if n.boolean > 0 {
			return fYes
		}
		return fNo
	}
	if v.kind == 0 || depth > fastMaxDepth {
		return fUnsure
	}
	depth++
	var d fdec
	parsed := false
	if n.types != 0 && n.types&v.kind == 0 {
		if v.kind != tNumber || n.types&tInteger == 0 {
			return fNo
		}
		var ok bool
		if d, ok = parseDec(v.s); !ok {
			return fUnsure
		}
		parsed = true
		if !d.isInt() {
			return fNo
		}
	}
	if n.hasConst {
		if r := n.constV.match(v); r != fYes {
			return r
		}
	}
	if n.enum != nil {
		if r := n.matchEnum(v); r != fYes {
			return r
		}
	}
	if n.ref != nil {
		if r := n.ref.eval(v, depth); r != fYes {
			return r
		}
	}
	switch v.kind {
	case tObject:
		if n.objKw {
			if r := n.evalObject(v.obj, depth); r != fYes {
				return r
			}
		}
	case tArray:
		if n.arrKw {
			if len(v.arr) < n.minItems {
				return fNo
			}
			if n.items != nil {
				for _, it := range v.arr {
					if r := n.items.eval(toFval(it), depth); r != fYes {
						return r
					}
				}
			}
		}
	case tString:
		if n.strKw {
			if n.minLength > 0 && (len(v.s) < n.minLength || utf8.RuneCountInString(v.s) < n.minLength) {
				return fNo
			}
			if n.pattern != nil && !n.pattern(v.s) {
				return fNo
			}
		}
	case tNumber:
		if n.numKw {
			if !parsed {
				var ok bool
				if d, ok = parseDec(v.s); !ok {
					return fUnsure
				}
			}
			if n.minimum != nil && d.cmp(n.minimum) < 0 ||
				n.maximum != nil && d.cmp(n.maximum) > 0 ||
				n.exMin != nil && d.cmp(n.exMin) <= 0 {
				return fNo
			}
		}
	}
	if n.dispatch != nil {
		if r := n.dispatch.eval(v, depth); r != fYes {
			return r
		}
	}
	for _, s := range n.allOf {
		if r := s.eval(v, depth); r != fYes {
			return r
		}
	}
	if n.anyOf != nil {
		r := fNo
		for _, s := range n.anyOf {
			switch s.eval(v, depth) {
			case fYes:
				r = fYes
			case fUnsure:
				r = fUnsure
			}
			if r == fYes {
				break
			}
		}
		if r != fYes {
			return r
		}
	}
	if n.not != nil {
		switch n.not.eval(v, depth) {
		case fYes:
			return fNo
		case fUnsure:
			return fUnsure
		}
	}
	if n.ifN != nil {
		switch n.ifN.eval(v, depth) {
		case fYes:
			if n.thenN != nil {
				return n.thenN.eval(v, depth)
			}
		case fNo:
			if n.elseN != nil {
				return n.elseN.eval(v, depth)
			}
		default:
			return fUnsure
		}
	}
	return fYes
}

func (n *fnode) matchEnum(v fval) fres {
	if n.enumStr != nil {
		if v.kind != tString {
			return fNo
		}
		if _, ok := n.enumStr[v.s]; ok {
			return fYes
		}
		return fNo
	}
	r := fNo
	for i := range n.enum {
		switch n.enum[i].match(v) {
		case fYes:
			return fYes
		case fUnsure:
			r = fUnsure
		}
	}
	return r
}

func (n *fnode) evalObject(obj map[string]any, depth int) fres {
	if len(obj) < n.minProps {
		return fNo
	}
	if len(obj) < n.requiredProps {
		return fNo
	}
	for _, r := range n.requiredOther {
		if _, ok := obj[r]; !ok {
			return fNo
		}
	}
	for _, dr := range n.depRequired {
		if _, ok := obj[dr.prop]; ok {
			for _, r := range dr.reqd {
				if _, ok := obj[r]; !ok {
					return fNo
				}
			}
		}
	}
	if n.props == nil && !n.noAdditional && n.additional == nil && n.propNames == nil {
		return fYes
	}
	found := 0
	for k, pv := range obj {
		if p, ok := n.props[k]; ok {
			if p.required {
				found++
			}
			if r := p.node.eval(toFval(pv), depth); r != fYes {
				return r
			}
		} else if n.noAdditional {
			return fNo
		} else if n.additional != nil {
			if r := n.additional.eval(toFval(pv), depth); r != fYes {
				return r
			}
		}
		if n.propNames != nil {
			if r := n.propNames.eval(fval{kind: tString, s: k}, depth); r != fYes {
				return r
			}
		}
	}
	if found < n.requiredProps {
		return fNo
	}
	return fYes
}

func (dp *fdispatch) eval(v fval, depth int) fres {
	var thens []*fnode
	switch v.kind {
	case tObject:
		pv, ok := v.obj[dp.prop]
		if !ok {
			return fYes
		}
		s, isStr := pv.(string)
		if !isStr {
			if toFval(pv).kind == 0 {
				return fUnsure
			}
			return fYes
		}
		thens = dp.cases[s]
	default:
		thens = dp.all
	}
	for _, t := range thens {
		if r := t.eval(v, depth); r != fYes {
			return r
		}
	}
	return fYes
}

// fdec is a JSON number literal read exactly: its value is
// 0.D × 10^pos, where D are the significant digits (no leading or trailing
// zeros) at positions [start, end) of the digit runs a (integer part) and b
// (fraction part) taken together. start == end is zero.
type fdec struct {
	neg        bool
	a, b       string
	start, end int
	pos        int
}

func (d *fdec) digit(i int) byte {
	if i < len(d.a) {
		return d.a[i]
	}
	return d.b[i-len(d.a)]
}

func (d *fdec) isZero() bool { return d.start == d.end }

func (d *fdec) isInt() bool { return d.isZero() || d.end-d.start <= d.pos }

func (d *fdec) sign() int {
	switch {
	case d.isZero():
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmp returns -1, 0 or +1 as d is less than, equal to or greater than e.
func (d *fdec) cmp(e *fdec) int {
	sd, se := d.sign(), e.sign()
	if sd != se {
		if sd < se {
			return -1
		}
		return 1
	}
	if sd == 0 {
		return 0
	}
	m := 0
	switch {
	case d.pos > e.pos:
		m = 1
	case d.pos < e.pos:
		m = -1
	default:
		i, j := d.start, e.start
		for ; i < d.end && j < e.end; i, j = i+1, j+1 {
			if x, y := d.digit(i), e.digit(j); x != y {
				if x > y {
					m = 1
				} else {
					m = -1
				}
				break
			}
		}
		if m == 0 {
			switch {
			case i < d.end:
				m = 1
			case j < e.end:
				m = -1
			}
		}
	}
	return m * sd
}

// parseDec reads a JSON number literal; ok is false for anything else and
// for numbers beyond fastNumberDigits digits or a fastNumberExp exponent.
func parseDec(s string) (d fdec, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	st := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return d, false
	}
	d.a = s[st:i]
	if i < len(s) && s[i] == '.' {
		i++
		st = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == st {
			return d, false
		}
		d.b = s[st:i]
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		st = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			exp = exp*10 + int(s[i]-'0')
			if exp > fastNumberExp {
				return d, false
			}
			i++
		}
		if i == st {
			return d, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return d, false
	}
	n := len(d.a) + len(d.b)
	if n > fastNumberDigits {
		return d, false
	}
	d.start, d.end = n, n
	for k := 0; k < n; k++ {
		if d.digit(k) != '0' {
			d.start = k
			break
		}
	}
	for k := n - 1; k >= d.start; k-- {
		if d.digit(k) != '0' {
			d.end = k + 1
			break
		}
	}
	d.pos = len(d.a) - d.start + exp
	return d, true
}

// fastSet holds the fast validators, by schema name.
type fastSet struct {
	byName map[string]*fnode
}

var (
	fastOnce    sync.Once
	fastSchemas *fastSet
	fastErr     error
)

func loadFastSchemas() (*fastSet, error) {
	fastOnce.Do(func() { fastSchemas, fastErr = compileFastSchemas() })
	return fastSchemas, fastErr
}

// fastAccepts reports whether v certainly conforms to the named schema.
// false means invalid or undecided: ask the library.
func fastAccepts(name string, v any) bool {
	set, err := loadFastSchemas()
	if err != nil {
		return false
	}
	n, ok := set.byName[name]
	return ok && n.eval(toFval(v), 0) == fYes
}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

type fastCompiler struct {
	docs  map[string]any    // resource URL (no fragment) → decoded file
	nodes map[string]*fnode // "<URL>#<pointer>" → node
}

func compileFastSchemas() (*fastSet, error) {
	c := &fastCompiler{docs: map[string]any{}, nodes: map[string]*fnode{}}
	var files []string
	err := fs.WalkDir(schemaFiles, "schemas", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := schemaFiles.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		id := SchemaBaseURL + strings.TrimPrefix(p, "schemas/")
		c.docs[id] = doc
		files = append(files, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Every file is compiled whole (definitions included), so a keyword
	// this validator does not know fails here even where no $ref reaches.
	sort.Strings(files)
	for _, id := range files {
		if _, err := c.at(id, ""); err != nil {
			return nil, err
		}
	}
	set := &fastSet{byName: map[string]*fnode{}}
	for _, name := range SchemaNames {
		n, err := c.at(SchemaBaseURL+name+".schema.json", "")
		if err != nil {
			return nil, err
		}
		set.byName[name] = n
	}
	return set, nil
}

// at returns the node of the schema at pointer ptr of the resource doc.
func (c *fastCompiler) at(doc, ptr string) (*fnode, error) {
	key := doc + "#" + ptr
	if n, ok := c.nodes[key]; ok {
		return n, nil
	}
	v, ok := c.docs[doc]
	if !ok {
		return nil, fmt.Errorf("fastschema: %s is not an embedded schema", doc)
	}
	if ptr != "" {
		if ptr[0] != '/' {
			return nil, fmt.Errorf("fastschema: %s: only JSON-pointer fragments are supported", key)
		}
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			switch x := v.(type) {
			case map[string]any:
				if v, ok = x[tok]; !ok {
					return nil, fmt.Errorf("fastschema: %s does not exist", key)
				}
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil, fmt.Errorf("fastschema: %s does not exist", key)
				}
				v = x[i]
			default:
				return nil, fmt.Errorf("fastschema: %s does not exist", key)
			}
		}
	}
	n := &fnode{loc: key}
	c.nodes[key] = n // before filling: recursive $refs find it
	if err := c.fill(n, v, doc, ptr); err != nil {
		return nil, err
	}
	return n, nil
}

func (c *fastCompiler) ref(doc, ref string) (*fnode, error) {
	base, err := url.Parse(doc)
	if err != nil {
		return nil, err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("fastschema: $ref %q in %s: %w", ref, doc, err)
	}
	u := base.ResolveReference(r)
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	return c.at(u.String(), frag)
}

func (c *fastCompiler) sub(doc, ptr string, parts ...string) (*fnode, error) {
	for _, p := range parts {
		ptr += "/" + escapePointerToken(p)
	}
	return c.at(doc, ptr)
}

func (c *fastCompiler) fill(n *fnode, v any, doc, ptr string) error {
	loc := doc + "#" + ptr
	if b, ok := v.(bool); ok {
		n.boolean = -1
		if b {
			n.boolean = 1
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("fastschema: %s is not a schema", loc)
	}
	bad := func(kw string) error {
		return fmt.Errorf("fastschema: %s: unsupported value of %q", loc, kw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, kw := range keys {
		val := m[kw]
		var err error
		switch kw {
		case "title", "description", "$comment":
		case "$schema":
			if ptr != "" || val != draft2020 {
				return bad(kw)
			}
		case "$id":
			if ptr != "" || val != doc {
				return bad(kw)
			}
		case "$defs":
			defs, ok := val.(map[string]any)
			if !ok {
				return bad(kw)
			}
			for name := range defs {
				if _, err = c.sub(doc, ptr, "$defs", name); err != nil {
					return err
				}
			}
		case "$ref":
			s, ok := val.(string)
			if !ok {
				return bad(kw)
			}
			n.ref, err = c.ref(doc, s)
		case "type":
			n.types, err = typeBits(val)
		case "const":
			n.hasConst = true
			n.constV, err = constOf(val)
		case "enum":
			list, ok := val.([]any)
			if !ok || len(list) == 0 {
				return bad(kw)
			}
			allStr := true
			n.enum = make([]fconst, len(list))
			for i, e := range list {
				if n.enum[i], err = constOf(e); err != nil {
					return err
				}
				allStr = allStr && n.enum[i].kind == tString
			}
			if allStr {
				n.enumStr = map[string]struct{}{}
				for _, e := range n.enum {
					n.enumStr[e.s] = struct{}{}
				}
			}
		case "properties":
			props, ok := val.(map[string]any)
			if !ok {
				return bad(kw)
			}
			n.objKw = true
			n.props = map[string]fprop{}
			for name := range props {
				s, err := c.sub(doc, ptr, "properties", name)
				if err != nil {
					return err
				}
				n.props[name] = fprop{node: s}
			}
		case "required":
			if n.required, err = stringList(val); err != nil {
				return bad(kw)
			}
			n.objKw = true
		case "additionalProperties":
			n.objKw = true
			switch val {
			case false:
				n.noAdditional = true
			case true:
			default:
				n.additional, err = c.sub(doc, ptr, kw)
			}
		case "minProperties":
			n.objKw = true
			n.minProps, err = nonNegative(val)
		case "propertyNames":
			n.objKw = true
			n.propNames, err = c.sub(doc, ptr, kw)
		case "dependentRequired":
			deps, ok := val.(map[string]any)
			if !ok {
				return bad(kw)
			}
			n.objKw = true
			names := make([]string, 0, len(deps))
			for name := range deps {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				reqd, err := stringList(deps[name])
				if err != nil {
					return bad(kw)
				}
				n.depRequired = append(n.depRequired, fdep{name, reqd})
			}
		case "items":
			if _, isList := val.([]any); isList {
				return bad(kw)
			}
			n.arrKw = true
			n.items, err = c.sub(doc, ptr, kw)
		case "minItems":
			n.arrKw = true
			n.minItems, err = nonNegative(val)
		case "minLength":
			n.strKw = true
			n.minLength, err = nonNegative(val)
		case "pattern":
			s, ok := val.(string)
			if !ok {
				return bad(kw)
			}
			n.strKw = true
			// The library's default engine is regexp.Compile too;
			// compilePattern keeps its answers.
			n.pattern, err = compilePattern(s)
		case "minimum", "maximum", "exclusiveMinimum":
			num, ok := val.(json.Number)
			if !ok {
				return bad(kw)
			}
			d, ok := parseDec(string(num))
			if !ok {
				return bad(kw)
			}
			n.numKw = true
			switch kw {
			case "minimum":
				n.minimum = &d
			case "maximum":
				n.maximum = &d
			default:
				n.exMin = &d
			}
		case "if", "then", "else", "not":
			var s *fnode
			if s, err = c.sub(doc, ptr, kw); err == nil {
				switch kw {
				case "if":
					n.ifN = s
				case "then":
					n.thenN = s
				case "else":
					n.elseN = s
				default:
					n.not = s
				}
			}
		case "allOf", "anyOf":
			list, ok := val.([]any)
			if !ok || len(list) == 0 {
				return bad(kw)
			}
			for i, e := range list {
				if kw == "allOf" {
					if done, err := c.addDispatch(n, e, doc, ptr, i); err != nil || done {
						if err != nil {
							return err
						}
						continue
					}
				}
				s, err := c.sub(doc, ptr, kw, strconv.Itoa(i))
				if err != nil {
					return err
				}
				if kw == "allOf" {
					n.allOf = append(n.allOf, s)
				} else {
					n.anyOf = append(n.anyOf, s)
				}
			}
		default:
			return fmt.Errorf("fastschema: %s: keyword %q is not supported", loc, kw)
		}
		if err != nil {
			return fmt.Errorf("fastschema: %s: %q: %w", loc, kw, err)
		}
	}
	for _, r := range n.required {
		switch p, ok := n.props[r]; {
		case !ok:
			n.requiredOther = append(n.requiredOther, r)
		case !p.required:
			p.required = true
			n.props[r] = p
			n.requiredProps++
		}
	}
	return nil
}

// addDispatch folds allOf member i into n.dispatch when it is an if/then
// pair on a string const (see fdispatch).
func (c *fastCompiler) addDispatch(n *fnode, e any, doc, ptr string, i int) (bool, error) {
	m, _ := e.(map[string]any)
	if len(m) != 2 || m["if"] == nil || m["then"] == nil {
		return false, nil
	}
	cond, _ := m["if"].(map[string]any)
	props, _ := cond["properties"].(map[string]any)
	reqd, _ := cond["required"].([]any)
	if len(cond) != 2 || len(props) != 1 || len(reqd) != 1 {
		return false, nil
	}
	var prop string
	var sch any
	for prop, sch = range props {
	}
	cm, _ := sch.(map[string]any)
	want, isStr := cm["const"].(string)
	if len(cm) != 1 || !isStr || reqd[0] != prop {
		return false, nil
	}
	if n.dispatch == nil {
		n.dispatch = &fdispatch{prop: prop, cases: map[string][]*fnode{}}
	} else if n.dispatch.prop != prop {
		return false, nil
	}
	then, err := c.sub(doc, ptr, "allOf", strconv.Itoa(i), "then")
	if err != nil {
		return false, err
	}
	n.dispatch.cases[want] = append(n.dispatch.cases[want], then)
	n.dispatch.all = append(n.dispatch.all, then)
	return true, nil
}

func typeBits(v any) (uint8, error) {
	names, ok := v.([]any)
	if !ok {
		names = []any{v}
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("empty type list")
	}
	var bits uint8
	for _, t := range names {
		switch t {
		case "null":
			bits |= tNull
		case "boolean":
			bits |= tBool
		case "object":
			bits |= tObject
		case "array":
			bits |= tArray
		case "string":
			bits |= tString
		case "number":
			bits |= tNumber
		case "integer":
			bits |= tInteger
		default:
			return 0, fmt.Errorf("unknown type %v", t)
		}
	}
	return bits, nil
}

func constOf(v any) (fconst, error) {
	switch x := v.(type) {
	case nil:
		return fconst{kind: tNull}, nil
	case bool:
		return fconst{kind: tBool, b: x}, nil
	case string:
		return fconst{kind: tString, s: x}, nil
	case json.Number:
		d, ok := parseDec(string(x))
		if !ok {
			return fconst{}, fmt.Errorf("number %s out of range", x)
		}
		return fconst{kind: tNumber, d: d}, nil
	}
	return fconst{}, fmt.Errorf("const/enum value %T is not supported", v)
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, fmt.Errorf("not a list of strings")
		}
	}
	return out, nil
}

func nonNegative(v any) (int, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("not a number")
	}
	i, err := strconv.Atoi(string(num))
	if err != nil || i < 0 {
		return 0, fmt.Errorf("not a non-negative integer: %s", num)
	}
	return i, nil
}
