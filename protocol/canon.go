package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) bytes of a value produced by Parse.
// It also accepts values built in Go from the same kinds plus float64, int,
// int64 and uint64.
func Canonical(v any) ([]byte, error) {
	return AppendCanonical(make([]byte, 0, 512), v)
}

// CanonicalBytes strictly parses data and returns its JCS bytes.
func CanonicalBytes(data []byte, opts DecodeOptions) ([]byte, error) {
	v, err := Parse(data, opts)
	if err != nil {
		return nil, err
	}
	return Canonical(v)
}

// Marshal returns the JCS bytes of a Go value: encoding/json first, then the
// strict parser, so the result obeys the same rules as inbound data.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalBytes(raw, DecodeOptions{MaxBytes: math.MaxInt})
}

// AppendCanonical appends the JCS bytes of v to dst.
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendCanonicalString(dst, x), nil
	case json.Number:
		return appendCanonicalNumber(dst, string(x))
	case float64:
		s, err := jcs.NumberToJSON(x)
		if err != nil {
			return nil, Errorf(CodeProtocolViolation, "number %v: %v", x, err)
		}
		return append(dst, s...), nil
	case int:
		return appendCanonicalInt(dst, int64(x))
	case int64:
		return appendCanonicalInt(dst, x)
	case uint64:
		if x > maxSafeInteger {
			return nil, Errorf(CodeProtocolViolation, "integer %d is beyond 2^53−1", x)
		}
		return strconv.AppendUint(dst, x, 10), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendCanonical(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		var arr [16]string
		keys := sortKeys(appendKeys(arr[:0], x))
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = AppendCanonical(dst, x[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	default:
		return nil, fmt.Errorf("protocol: cannot canonicalize a %T", v)
	}
}

func appendCanonicalInt(dst []byte, n int64) ([]byte, error) {
	if n > maxSafeInteger || n < -maxSafeInteger {
		return nil, Errorf(CodeProtocolViolation, "integer %d is beyond ±(2^53−1)", n)
	}
	return strconv.AppendInt(dst, n, 10), nil
}

// appendCanonicalNumber writes a number literal the way ECMAScript's
// Number.prototype.toString would (RFC 8785 §3.2.2.3). Plain integer
// literals within 2^53 are already in that form, which skips a float parse.
func appendCanonicalNumber(dst []byte, lit string) ([]byte, error) {
	if plainInteger(lit) {
		if lit == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, Errorf(CodeProtocolViolation, "number %s is not a finite binary64", lit)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, Errorf(CodeProtocolViolation, "number %s: %v", lit, err)
	}
	return append(dst, s...), nil
}

// plainInteger reports a literal of at most 15 digits with no leading zero,
// fraction or exponent: exactly what ES6 prints for that integer.
func plainInteger(lit string) bool {
	d := lit
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendCanonicalString escapes only what RFC 8785 §3.2.2.2 requires.
func appendCanonicalString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compareUTF16 orders member names by their UTF-16 code units (RFC 8785
// §3.2.3). UTF-8 byte order equals code point order, which differs from
// UTF-16 order only between U+E000–U+FFFF and supplementary characters.
func compareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf || b[i] < utf8.RuneSelf {
		// An ASCII byte starts a rune on both sides and sorts below any
		// other rune in either order.
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the differing rune.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return int(utf16Key(ra)) - int(utf16Key(rb))
}

// utf16Key is the first UTF-16 code unit of r; two different runes with the
// same first unit are supplementary characters whose order matches
// code point order, which the low bits preserve.
func utf16Key(r rune) int64 {
	if r < 0x10000 {
		return int64(r) << 10
	}
	hi, lo := utf16.EncodeRune(r)
	return int64(hi)<<10 | int64(lo-0xDC00)
}

// Digest returns "sha256:" and the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DigestValue returns the digest of v's canonical bytes.
func DigestValue(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}

// ArtifactDigest computes an artifact manifest's artifactDigest (spec 22):
// remove exactly the top-level artifactDigest member, JCS, SHA-256.
func ArtifactDigest(manifest map[string]any) (string, error) {
	m := make(map[string]any, len(manifest))
	for k, v := range manifest {
		if k != "artifactDigest" {
			m[k] = v
		}
	}
	return DigestValue(m)
}
