package protocol

import (
	"regexp"
	"strings"
)

// Schema patterns are matched on every string of every inbound document,
// and most of them are a few character classes with counts: an id, a key
// id, a digest, a signature value. compilePattern matches those with a
// scan of the bytes instead of the regexp engine (a tenth of an inbound
// command's non-signature cost went to regexp) and leaves every other
// pattern to regexp. TestPatternAgreesWithRegexp holds the two equal.

// patternAtom is one character class (or literal) repeated min to max times.
type patternAtom struct {
	set      [256]bool
	min, max int
}

// compilePattern returns a matcher for the JSON Schema pattern s.
func compilePattern(s string) (func(string) bool, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	if atoms, ok := parseSimplePattern(s); ok {
		return func(v string) bool { return matchAtoms(atoms, v) }, nil
	}
	switch s {
	case wireTimePattern:
		return matchWireTime, nil
	case extensionURIPattern:
		return matchExtensionURI, nil
	}
	return re.MatchString, nil
}

// The two patterns of every Command that are not a few classes with counts,
// each matched by a scan written for it.
const (
	wireTimePattern     = `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,3})?Z$`
	extensionURIPattern = `^(urn:[A-Za-z0-9][A-Za-z0-9-]{0,31}:[^\s]+|https?://[^\s]+)$`
)

func matchWireTime(v string) bool {
	n := len(v)
	if n != 20 && (n < 22 || n > 24) {
		return false
	}
	in := func(i int, lo, hi byte) bool { return v[i] >= lo && v[i] <= hi }
	digit := func(i int) bool { return in(i, '0', '9') }
	switch {
	case !digit(0) || !digit(1) || !digit(2) || !digit(3) || v[4] != '-' || v[7] != '-' || v[10] != 'T',
		!(v[5] == '0' && in(6, '1', '9') || v[5] == '1' && in(6, '0', '2')),
		!(v[8] == '0' && in(9, '1', '9') || in(8, '1', '2') && digit(9) || v[8] == '3' && in(9, '0', '1')),
		!(in(11, '0', '1') && digit(12) || v[11] == '2' && in(12, '0', '3')),
		v[13] != ':' || !in(14, '0', '5') || !digit(15) || v[16] != ':' || !in(17, '0', '5') || !digit(18),
		v[n-1] != 'Z':
		return false
	}
	if n == 20 {
		return true
	}
	if v[19] != '.' {
		return false
	}
	for i := 20; i < n-1; i++ {
		if !digit(i) {
			return false
		}
	}
	return true
}

func matchExtensionURI(v string) bool {
	if rest, ok := strings.CutPrefix(v, "urn:"); ok {
		i := 0
		for i < len(rest) && i < 33 && (isAlnum(rest[i]) || i > 0 && rest[i] == '-') {
			i++
		}
		if i == 0 || i == 33 || i >= len(rest) || rest[i] != ':' {
			return false
		}
		return nonSpace(rest[i+1:])
	}
	if rest, ok := strings.CutPrefix(v, "https://"); ok {
		return nonSpace(rest)
	}
	rest, ok := strings.CutPrefix(v, "http://")
	return ok && nonSpace(rest)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// nonSpace is [^\s]+ of RE2: one byte at least and none of \t \n \f \r
// and space (an invalid UTF-8 byte reads as U+FFFD, which matches).
func nonSpace(s string) bool {
	return s != "" && !strings.ContainsAny(s, "\t\n\f\r ")
}

// parseSimplePattern reads ^atom...atom$ where every atom is an ASCII
// literal or a bracketed ASCII class without negation, each with an
// optional {n} or {n,m}, and only the last may vary in count: then a
// greedy scan decides exactly what regexp decides.
func parseSimplePattern(s string) ([]patternAtom, bool) {
	if len(s) < 2 || s[0] != '^' || s[len(s)-1] != '$' {
		return nil, false
	}
	body := s[1 : len(s)-1]
	var atoms []patternAtom
	for i := 0; i < len(body); {
		if n := len(atoms); n > 0 && atoms[n-1].min != atoms[n-1].max {
			return nil, false // a varying count before another atom
		}
		var a patternAtom
		switch c := body[i]; {
		case c == '[':
			end, ok := parseClass(body, i+1, &a.set)
			if !ok {
				return nil, false
			}
			i = end
		case c == '\\':
			if i+1 >= len(body) || body[i+1] != '.' {
				return nil, false
			}
			a.set['.'] = true
			i += 2
		case isPlainLiteral(c):
			a.set[c] = true
			i++
		default:
			return nil, false
		}
		a.min, a.max = 1, 1
		if i < len(body) && body[i] == '{' {
			end, lo, hi, ok := parseCount(body, i+1)
			if !ok {
				return nil, false
			}
			a.min, a.max, i = lo, hi, end
		}
		atoms = append(atoms, a)
	}
	return atoms, len(atoms) > 0
}

func isPlainLiteral(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '-' || c == '_' || c == '/' || c == '#'
}

// parseClass reads a class body from i up to its ']' into set; it returns
// the index after the ']'.
func parseClass(p string, i int, set *[256]bool) (int, bool) {
	if i < len(p) && p[i] == '^' {
		return 0, false // negation
	}
	start := i
	for i < len(p) && p[i] != ']' {
		c := p[i]
		if c == '\\' || c == '[' || c >= 0x80 {
			return 0, false
		}
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi := p[i+2]
			if hi == '\\' || hi == '[' || hi >= 0x80 || hi < c {
				return 0, false
			}
			for x := int(c); x <= int(hi); x++ {
				set[x] = true
			}
			i += 3
			continue
		}
		set[c] = true
		i++
	}
	if i >= len(p) || i == start {
		return 0, false
	}
	return i + 1, true
}

// parseCount reads n} or n,m} from i.
func parseCount(p string, i int) (end, lo, hi int, ok bool) {
	num := func() (int, bool) {
		n, digits := 0, 0
		for i < len(p) && p[i] >= '0' && p[i] <= '9' && digits < 5 {
			n = n*10 + int(p[i]-'0')
			i++
			digits++
		}
		return n, digits > 0
	}
	if lo, ok = num(); !ok {
		return 0, 0, 0, false
	}
	hi = lo
	if i < len(p) && p[i] == ',' {
		i++
		if hi, ok = num(); !ok || hi < lo {
			return 0, 0, 0, false
		}
	}
	if i >= len(p) || p[i] != '}' {
		return 0, 0, 0, false
	}
	return i + 1, lo, hi, true
}

func matchAtoms(atoms []patternAtom, v string) bool {
	i := 0
	for _, a := range atoms {
		n := 0
		for n < a.max && i < len(v) && a.set[v[i]] {
			n++
			i++
		}
		if n < a.min {
			return false
		}
	}
	return i == len(v)
}
