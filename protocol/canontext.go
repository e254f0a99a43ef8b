package protocol

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// appendCanonicalText appends the JCS bytes of the JSON text data, as
// Canonical(Parse(data)) would, without building the tree: members are
// written to dst as they are read and put in order in place, so there is
// no map, no boxed value and no string per member; an object needs room
// for its members twice while they are put in order. It refuses exactly what
// Parse refuses (depth counts from depth, the nesting of the value that
// holds data, and is bounded by maxDepth), with the same error code; the
// messages are shorter and carry no JSON pointer.
//
// It serves what this process marshalled itself (an event payload from
// encoding/json): Go's escapes of <, >, & and U+2028/9 decode to the same
// characters, and -0 and floats are rewritten as ECMAScript prints them.
func appendCanonicalText(dst, data []byte, depth, maxDepth int) ([]byte, error) {
	c := canonPool.Get().(*textCanon)
	defer canonPool.Put(c)
	*c = textCanon{data: data, depth: depth, maxDepth: maxDepth, members: c.members[:0]}
	c.skipSpace()
	out, err := c.value(dst)
	if err == nil {
		if c.skipSpace(); c.pos != len(c.data) {
			err = c.fail("unexpected data after the JSON value at byte %d", c.pos)
		}
	}
	c.data = nil
	if err != nil {
		return nil, err
	}
	return out, nil
}

// canonPool keeps member stacks between calls.
var canonPool = sync.Pool{New: func() any { return &textCanon{members: make([]memberSpan, 0, 64)} }}

type textCanon struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int
	// members is a stack shared by nested objects: offsets, into the
	// output, of each member's decoded name and canonical value.
	members []memberSpan
}

type memberSpan struct {
	name, value [2]int
	decoded     bool // name is in the output, decoded; else in the input
}

func (c *textCanon) fail(format string, args ...any) *Error {
	return Errorf(CodeProtocolViolation, format, args...)
}

func (c *textCanon) skipSpace() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *textCanon) value(b []byte) ([]byte, error) {
	if c.pos >= len(c.data) {
		return nil, c.fail("unexpected end of input")
	}
	switch ch := c.data[c.pos]; {
	case ch == '{':
		return c.object(b)
	case ch == '[':
		return c.array(b)
	case ch == '"':
		b = append(b, '"')
		b, err := c.str(b, true)
		if err != nil {
			return nil, err
		}
		return append(b, '"'), nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number(b)
	case ch == 't':
		return c.literal(b, "true")
	case ch == 'f':
		return c.literal(b, "false")
	case ch == 'n':
		return c.literal(b, "null")
	default:
		return nil, c.fail("invalid character %q at byte %d", ch, c.pos)
	}
}

func (c *textCanon) literal(b []byte, lit string) ([]byte, error) {
	if len(c.data)-c.pos < len(lit) || string(c.data[c.pos:c.pos+len(lit)]) != lit {
		return nil, c.fail("invalid literal at byte %d", c.pos)
	}
	c.pos += len(lit)
	return append(b, lit...), nil
}

func (c *textCanon) enter() error {
	c.depth++
	if c.depth > c.maxDepth {
		return c.fail("nesting deeper than %d", c.maxDepth)
	}
	return nil
}

// object reads the members into b after mark (each value canonical, each
// name that needs decoding decoded; a plain name stays where it is in the
// input), then appends them in RFC 8785 order and moves that result down
// to mark.
func (c *textCanon) object(b []byte) ([]byte, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	c.pos++ // '{'
	c.skipSpace()
	if c.pos < len(c.data) && c.data[c.pos] == '}' {
		c.pos++
		c.depth--
		return append(b, "{}"...), nil
	}
	mark, base := len(b), len(c.members)
	for {
		if c.pos >= len(c.data) || c.data[c.pos] != '"' {
			return nil, c.fail("expected member name at byte %d", c.pos)
		}
		var m memberSpan
		var err error
		if end, ok := c.plainString(); ok {
			m.name = [2]int{c.pos + 1, end}
			c.pos = end + 1
		} else {
			m.decoded = true
			m.name[0] = len(b)
			if b, err = c.str(b, false); err != nil {
				return nil, err
			}
			m.name[1] = len(b)
		}
		c.skipSpace()
		if c.pos >= len(c.data) || c.data[c.pos] != ':' {
			return nil, c.fail("expected ':' after member name at byte %d", c.pos)
		}
		c.pos++
		c.skipSpace()
		m.value[0] = len(b)
		if b, err = c.value(b); err != nil {
			return nil, err
		}
		m.value[1] = len(b)
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.data) {
			return nil, c.fail("unterminated object")
		}
		if c.data[c.pos] == ',' {
			c.pos++
			c.skipSpace()
			continue
		}
		if c.data[c.pos] != '}' {
			return nil, c.fail("expected ',' or '}' at byte %d", c.pos)
		}
		c.pos++
		c.depth--
		break
	}
	ms := c.members[base:]
	c.sortMembers(ms, b)
	out := len(b)
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			if bytes.Equal(c.nameBytes(ms[i-1], b), c.nameBytes(m, b)) {
				return nil, c.fail("duplicate member name %q", c.nameBytes(m, b))
			}
			b = append(b, ',')
		}
		if m.decoded {
			b = appendCanonicalString(b, string(b[m.name[0]:m.name[1]]))
		} else {
			b = append(b, '"')
			b = append(b, c.data[m.name[0]:m.name[1]]...)
			b = append(b, '"')
		}
		b = append(b, ':')
		b = append(b, b[m.value[0]:m.value[1]]...)
	}
	b = append(b, '}')
	c.members = c.members[:base]
	n := copy(b[mark:], b[out:])
	return b[:mark+n], nil
}

// nameBytes is a member's name: in the input, or decoded in b.
func (c *textCanon) nameBytes(m memberSpan, b []byte) []byte {
	if m.decoded {
		return b[m.name[0]:m.name[1]]
	}
	return c.data[m.name[0]:m.name[1]]
}

// sortMembers puts members in RFC 8785 order; objects are small, so an
// insertion sort does until they are not.
func (c *textCanon) sortMembers(ms []memberSpan, b []byte) {
	if len(ms) > 24 {
		slices.SortFunc(ms, func(x, y memberSpan) int { return compareUTF16Bytes(c.nameBytes(x, b), c.nameBytes(y, b)) })
		return
	}
	for i := 1; i < len(ms); i++ {
		m, name := ms[i], c.nameBytes(ms[i], b)
		j := i
		for ; j > 0 && compareUTF16Bytes(c.nameBytes(ms[j-1], b), name) > 0; j-- {
			ms[j] = ms[j-1]
		}
		ms[j] = m
	}
}

// plainString reports whether the string at c.pos is printable ASCII
// with no escape, which JCS writes as it is, and where its closing quote
// is.
func (c *textCanon) plainString() (int, bool) {
	for i := c.pos + 1; i < len(c.data); i++ {
		if ch := c.data[i]; ch == '"' {
			return i, true
		} else if !plainByte[ch] {
			return 0, false
		}
	}
	return 0, false
}

// plainByte marks the bytes JCS copies inside a string without a look at
// their neighbours: printable ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for ch := 0x20; ch < 0x80; ch++ {
		t[ch] = ch != '"' && ch != '\\'
	}
	return t
}()

func (c *textCanon) array(b []byte) ([]byte, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	c.pos++ // '['
	c.skipSpace()
	b = append(b, '[')
	if c.pos < len(c.data) && c.data[c.pos] == ']' {
		c.pos++
		c.depth--
		return append(b, ']'), nil
	}
	for {
		var err error
		if b, err = c.value(b); err != nil {
			return nil, err
		}
		c.skipSpace()
		if c.pos >= len(c.data) {
			return nil, c.fail("unterminated array")
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
			c.skipSpace()
			b = append(b, ',')
		case ']':
			c.pos++
			c.depth--
			return append(b, ']'), nil
		default:
			return nil, c.fail("expected ',' or ']' at byte %d", c.pos)
		}
	}
}

// str reads the string at c.pos (which holds '"') under Parse's rules and
// appends its characters to b: as JCS writes them inside quotes when
// escape is set, else decoded (a member name, compared before it is
// written).
func (c *textCanon) str(b []byte, escape bool) ([]byte, error) {
	d := c.data
	i := c.pos + 1
	for {
		start := i
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		b = append(b, d[start:i]...)
		if i >= len(d) {
			return nil, c.fail("unterminated string")
		}
		ch := d[i]
		switch {
		case ch == '"':
			c.pos = i + 1
			return b, nil
		case ch < 0x20:
			return nil, c.fail("control character 0x%02x in string at byte %d", ch, i)
		case ch >= 0x80:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, c.fail("invalid UTF-8 at byte %d", i)
			}
			if isNoncharacter(r) {
				return nil, c.fail("Unicode noncharacter U+%04X at byte %d", r, i)
			}
			b = append(b, d[i:i+size]...)
			i += size
		default: // backslash
			if i+1 >= len(d) {
				return nil, c.fail("unterminated escape at byte %d", i)
			}
			esc := d[i+1]
			i += 2
			var r rune
			switch esc {
			case '"', '\\', '/':
				r = rune(esc)
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				var ok bool
				if r, ok = hex4(d, i); !ok {
					return nil, c.fail("invalid \\u escape at byte %d", i-2)
				}
				i += 4
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if i+6 <= len(d) && d[i] == '\\' && d[i+1] == 'u' {
						lo, ok = hex4(d, i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, c.fail("lone high surrogate \\u%04X at byte %d", r, i-6)
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, c.fail("lone low surrogate \\u%04X at byte %d", r, i-6)
				}
				if isNoncharacter(r) {
					return nil, c.fail("Unicode noncharacter U+%04X at byte %d", r, i-6)
				}
			default:
				return nil, c.fail("invalid escape '\\%c' at byte %d", esc, i-2)
			}
			if escape && (r < 0x20 || r == '"' || r == '\\') {
				b = appendEscaped(b, byte(r))
			} else {
				b = utf8.AppendRune(b, r)
			}
		}
	}
}

// appendEscaped writes one character that JCS escapes inside a string,
// as appendCanonicalString does.
func appendEscaped(b []byte, ch byte) []byte {
	switch ch {
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xF])
}

// number reads a number under Parse's grammar and I-JSON limits and
// appends it as ECMAScript prints it. Integer literals of up to 15 digits
// are already in that form (-0 aside) and are copied.
func (c *textCanon) number(b []byte) ([]byte, error) {
	n, msg := scanNumber(c.data, c.pos)
	if msg != "" {
		return nil, c.fail("%s", msg)
	}
	lit := c.data[c.pos:n.end]
	c.pos = n.end
	if n.integer && len(lit) <= 15 || n.integer && len(lit) == 16 && lit[0] == '-' {
		// Within ±(10^15−1): in range, and already as ECMAScript prints it.
		if string(lit) == "-0" {
			return append(b, '0'), nil
		}
		return append(b, lit...), nil
	}
	s := string(lit)
	f, msg := n.ijson(s)
	if msg != "" {
		return nil, c.fail("%s", msg)
	}
	if n.integer {
		return appendCanonicalNumber(b, s)
	}
	out, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, c.fail("number %s: %v", s, err)
	}
	return append(b, out...), nil
}

// compareUTF16Bytes is compareUTF16 for names held as bytes.
func compareUTF16Bytes(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Key(ra)) - int(utf16Key(rb))
}
