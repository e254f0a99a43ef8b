package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// DecodeOptions bounds what Parse accepts from outside.
type DecodeOptions struct {
	MaxBytes int // largest document accepted; 0 means DefaultMaxBytes
	MaxDepth int // deepest nesting of arrays and objects; 0 means DefaultMaxDepth
}

// Default limits for documents and frames.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxDepth = 64
)

// maxSafeInteger is 2^53-1, the largest integer every binary64 peer holds exactly.
const maxSafeInteger = MaxSafeInteger

// MaxSafeInteger is the largest integer I-JSON carries exactly (2^53-1): the
// bound of every epoch, sequence and revision.
const MaxSafeInteger = 1<<53 - 1

// Parse decodes one JSON text under the strict I-JSON rules of docs/wire.md and
// returns it as map[string]any, []any, string, json.Number, bool or nil.
// Every breach is a *Error with code PROTOCOL_VIOLATION and a JSON pointer:
// malformed JSON, a byte-order mark, duplicate member names at any depth,
// integer literals beyond ±(2^53−1), numbers that overflow binary64 or
// underflow to zero from a nonzero literal, invalid UTF-8, lone surrogates
// (raw or escaped), noncharacters, and documents over the size or depth limit.
//
// The returned value is meant to be parsed once and reused for schema
// validation, canonical bytes and signature checks.
func Parse(data []byte, opts DecodeOptions) (any, error) {
	return parse(data, opts, nil)
}

// parse is Parse that, with raw non-nil, also notes whether data is
// already canonical and where a signed document's parts lie in it.
func parse(data []byte, opts DecodeOptions, raw *rawLayout) (any, error) {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(data) > maxBytes {
		return nil, Errorf(CodeProtocolViolation, "document is %d bytes, over the %d-byte limit", len(data), maxBytes)
	}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		return nil, Errorf(CodeProtocolViolation, "byte-order mark at start of document")
	}
	st := stackPool.Get().(*parseStacks)
	defer st.put()
	p := parser{data: data, maxDepth: maxDepth, members: st.members[:0], path: st.path[:0], raw: raw, names: internedTable()}
	defer func() { st.members, st.path = p.members, p.path }()
	if raw != nil {
		*raw = rawLayout{canonical: true}
		p.text = string(data)
	}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail("unexpected data after the JSON value at byte %d", p.pos)
	}
	return v, nil
}

// parseStacks are a parser's stacks, kept between parses.
type parseStacks struct {
	members []member
	path    []string
}

var stackPool = sync.Pool{New: func() any {
	return &parseStacks{members: make([]member, 0, 64), path: make([]string, 0, 16)}
}}

// put returns the stacks to the pool without the values they pointed to
// (an object that ends clears its members; a failed parse leaves some).
func (st *parseStacks) put() {
	clear(st.members)
	clear(st.path[:cap(st.path)])
	stackPool.Put(st)
}

type parser struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int
	path     []string // member names and array indexes to the current value
	// members is a stack shared by nested objects: an object's members
	// wait here until it ends, so its map is made at its size once.
	members []member
	raw     *rawLayout // nil unless the caller asked (parse)
	names   *nameTable
	// text is data as a string when the document is kept whole (a signed
	// Command): plain strings are its substrings, one copy instead of one each.
	text string
}

type member struct {
	name string
	v    any
}

// smallObject is the most members an object keeps on the stack, found
// duplicate by comparison; a larger one goes to its map as it is read.
const smallObject = 16

func (p *parser) fail(format string, args ...any) *Error {
	return Errorf(CodeProtocolViolation, format, args...).At(pointerOf(p.path))
}

// Pointer renders an RFC 6901 JSON pointer of the given member names.
func Pointer(path ...string) string { return pointerOf(path) }

// pointerOf renders an RFC 6901 JSON pointer.
func pointerOf(path []string) string {
	if len(path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range path {
		b.WriteByte('/')
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(s[i])
			}
		}
	}
	return b.String()
}

func (p *parser) skipSpace() {
	start := p.pos
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
			continue
		}
		break
	}
	if p.pos != start && p.raw != nil {
		p.raw.canonical = false
	}
}

func (p *parser) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.fail("invalid character %q at byte %d", c, p.pos)
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.fail("invalid literal at byte %d", p.pos)
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.fail("nesting deeper than %d", p.maxDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return map[string]any{}, nil
	}
	base := len(p.members)
	var m map[string]any // set once the object outgrows the stack
	prev := ""
	for i := 0; ; i++ {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("expected member name at byte %d", p.pos)
		}
		nameAt := p.pos
		name, err := p.memberName()
		if err != nil {
			return nil, err
		}
		dup := false
		if m != nil {
			_, dup = m[name]
		} else {
			for _, e := range p.members[base:] {
				if e.name == name {
					dup = true
					break
				}
			}
		}
		if dup {
			p.path = append(p.path, name)
			return nil, p.fail("duplicate member name %q", name)
		}
		if p.raw != nil && i > 0 && compareUTF16(prev, name) > 0 {
			p.raw.canonical = false
		}
		prev = name
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("expected ':' after member name at byte %d", p.pos)
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, name)
		valueAt := p.pos
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		if p.raw != nil {
			p.note(name, i, nameAt, valueAt)
		}
		switch {
		case m != nil:
			m[name] = v
		case len(p.members)-base < smallObject:
			p.members = append(p.members, member{name, v})
		default:
			m = make(map[string]any, 2*smallObject)
			for _, e := range p.members[base:] {
				m[e.name] = e.v
			}
			m[name] = v
			p.popMembers(base)
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			p.depth--
			if m == nil {
				m = make(map[string]any, len(p.members)-base)
				for _, e := range p.members[base:] {
					m[e.name] = e.v
				}
				p.popMembers(base)
			}
			return m, nil
		default:
			return nil, p.fail("expected ',' or '}' at byte %d", p.pos)
		}
	}
}

// popMembers drops the stack's members from base on, letting go of their values.
func (p *parser) popMembers(base int) {
	clear(p.members[base:])
	p.members = p.members[:base]
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	p.skipSpace()
	a := make([]any, 0, 4)
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return a, nil
	}
	for {
		p.path = append(p.path, strconv.Itoa(len(a)))
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		a = append(a, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			p.depth--
			return a, nil
		default:
			return nil, p.fail("expected ',' or ']' at byte %d", p.pos)
		}
	}
}

// isNoncharacter reports the 66 Unicode noncharacters.
func isNoncharacter(r rune) bool {
	return (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE
}

// str parses a string at p.pos (which holds '"').
func (p *parser) str() (string, error) {
	start := p.pos + 1
	i := start
	// Fast path: printable ASCII without escapes needs one allocation only.
	for i < len(p.data) {
		c := p.data[i]
		if c == '"' {
			p.pos = i + 1
			if p.text != "" {
				return p.text[start:i], nil
			}
			return string(p.data[start:i]), nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, p.data[start:i]...)
	for {
		if i >= len(p.data) {
			p.pos = i
			return "", p.fail("unterminated string")
		}
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character 0x%02x in string at byte %d", c, i)
		case c < 0x80 && c != '\\':
			buf = append(buf, c)
			i++
		case c >= 0x80:
			r, size := utf8.DecodeRune(p.data[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail("invalid UTF-8 at byte %d", i)
			}
			// utf8.DecodeRune already rejects encoded surrogates and overlongs.
			if isNoncharacter(r) {
				return "", p.fail("Unicode noncharacter U+%04X at byte %d", r, i)
			}
			buf = append(buf, p.data[i:i+size]...)
			i += size
		default: // backslash
			if p.raw != nil && !canonicalEscape(p.data[i:]) {
				p.raw.canonical = false
			}
			if i+1 >= len(p.data) {
				return "", p.fail("unterminated escape at byte %d", i)
			}
			esc := p.data[i+1]
			i += 2
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(p.data, i)
				if !ok {
					return "", p.fail("invalid \\u escape at byte %d", i-2)
				}
				i += 4
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if i+6 <= len(p.data) && p.data[i] == '\\' && p.data[i+1] == 'u' {
						lo, ok = hex4(p.data, i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "", p.fail("lone high surrogate \\u%04X at byte %d", r, i-6)
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", p.fail("lone low surrogate \\u%04X at byte %d", r, i-6)
				}
				if isNoncharacter(r) {
					return "", p.fail("Unicode noncharacter U+%04X at byte %d", r, i-6)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.fail("invalid escape '\\%c' at byte %d", esc, i-2)
			}
		}
	}
}

// canonicalEscape reports whether the escape at e[0] is the one RFC 8785
// writes: \" \\ \b \f \n \r \t, or \u00xx in lowercase for another
// control character.
func canonicalEscape(e []byte) bool {
	if len(e) < 2 {
		return false
	}
	switch e[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(e) < 6 || e[2] != '0' || e[3] != '0' || (e[4] != '0' && e[4] != '1') {
			return false
		}
		c := e[5]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
		switch string(e[4:6]) {
		case "08", "09", "0a", "0c", "0d":
			return false // written \b \t \n \f \r
		}
		return true
	}
	return false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number scans the RFC 8259 number grammar and applies the I-JSON limits.
func (p *parser) number() (any, error) {
	n, msg := scanNumber(p.data, p.pos)
	if msg != "" {
		return nil, p.fail("%s", msg)
	}
	if d := p.data[p.pos:n.end]; n.integer && len(d) <= 3 && d[0] != '-' {
		// Small counts, epochs and revisions are everywhere: one boxed
		// value each, shared (canonical as written: no sign, no leading zero).
		v := 0
		for _, c := range d {
			v = v*10 + int(c-'0')
		}
		p.pos = n.end
		return smallNumbers[v], nil
	}
	lit := string(p.data[p.pos:n.end])
	p.pos = n.end
	if _, msg := n.ijson(lit); msg != "" {
		return nil, p.fail("%s", msg)
	}
	if p.raw != nil && p.raw.canonical && (!plainInteger(lit) || lit == "-0") {
		var buf [32]byte
		if c, err := appendCanonicalNumber(buf[:0], lit); err != nil || string(c) != lit {
			p.raw.canonical = false
		}
	}
	return json.Number(lit), nil
}

// smallNumbers holds json.Number "0" … "999", boxed once.
var smallNumbers = func() (a [1000]any) {
	for i := range a {
		a[i] = json.Number(strconv.Itoa(i))
	}
	return a
}()

// numberLit is one JSON number literal as scanned: where it ends, whether
// it is an integer literal (no fraction, no exponent), and whether any
// significant digit is nonzero (so a zero value is an underflow).
type numberLit struct {
	end              int
	integer, nonzero bool
}

// scanNumber reads the RFC 8259 number grammar at d[start:]; a malformed
// literal is returned as the message of its protocol error. The strict
// parser and the one-pass canonicalizer share it, so both refuse alike.
func scanNumber(d []byte, start int) (numberLit, string) {
	n := numberLit{integer: true}
	i := start
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			n.nonzero = n.nonzero || d[i] != '0'
			i++
		}
	default:
		return n, fmt.Sprintf("invalid number at byte %d", start)
	}
	if i < len(d) && d[i] == '.' {
		n.integer = false
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return n, fmt.Sprintf("invalid number at byte %d: digit expected after '.'", start)
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			n.nonzero = n.nonzero || d[i] != '0'
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		n.integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return n, fmt.Sprintf("invalid number at byte %d: digit expected in exponent", start)
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	n.end = i
	return n, ""
}

// ijson applies the I-JSON limits to the literal n scanned: integers within
// ±(2^53−1), other numbers neither overflowing binary64 nor underflowing to
// zero from a nonzero literal. It returns the value of a non-integer.
func (n numberLit) ijson(lit string) (float64, string) {
	if n.integer {
		digits := strings.TrimPrefix(lit, "-")
		if len(digits) > 16 {
			return 0, fmt.Sprintf("integer %s is beyond ±(2^53−1)", lit)
		}
		if v, _ := strconv.ParseUint(digits, 10, 64); v > maxSafeInteger {
			return 0, fmt.Sprintf("integer %s is beyond ±(2^53−1)", lit)
		}
		return 0, ""
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Sprintf("number %s overflows binary64", lit)
	}
	if f == 0 && n.nonzero {
		return 0, fmt.Sprintf("number %s underflows binary64 to zero", lit)
	}
	return f, ""
}
