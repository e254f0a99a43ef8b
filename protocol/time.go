package protocol

import (
	"time"
)

// Time is a wire timestamp (docs/wire.md): RFC 3339 in UTC with a literal Z and at
// most millisecond precision. It always marshals as 2026-11-30T08:00:00Z when
// the milliseconds are zero and as 2026-11-30T08:00:00.120Z (three digits)
// otherwise, so a value decoded from our own output re-encodes to the same
// bytes. Decoding accepts only the UTC Z form with 0–3 fraction digits.
//
// Values are kept in UTC, truncated to the millisecond and without a
// monotonic reading, so == and reflect.DeepEqual compare instants.
type Time struct {
	time.Time
}

const (
	wireLayoutSeconds = "2006-01-02T15:04:05Z"
	wireLayoutMillis  = "2006-01-02T15:04:05.000Z"
)

// NewTime converts t to a wire Time: UTC, truncated to the millisecond.
func NewTime(t time.Time) Time {
	return Time{t.UTC().Truncate(time.Millisecond)}
}

// ParseTime parses a wire timestamp; any other form is a *Error with code
// SCHEMA_VALIDATION_FAILED.
func ParseTime(s string) (Time, error) {
	if t, ok := parseWireTime(s); ok {
		return t, nil
	}
	if !wireTimeShape(s) {
		return Time{}, Errorf(CodeSchemaValidationFailed, "time %q is not RFC 3339 UTC (YYYY-MM-DDTHH:MM:SS[.fff]Z)", s)
	}
	// time.Parse checks the calendar (month lengths, leap years, hour
	// ranges); the shape check above already fixed the syntax.
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Time{}, Errorf(CodeSchemaValidationFailed, "time %q: %v", s, err)
	}
	return Time{t.UTC()}, nil
}

// parseWireTime is ParseTime's result for a wire timestamp of a valid
// date and time, computed from its digits: time.Parse cost several times
// as much, and replay parses a few timestamps an event. Anything else
// answers false, and ParseTime decides (TestParseWireTime, FuzzParseWireTime).
func parseWireTime[S ~string | ~[]byte](s S) (Time, bool) {
	if !wireTimeShape(s) {
		return Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for j := i; j < i+n; j++ {
			v = v*10 + int(s[j]-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return Time{}, false
	}
	nsec := 0
	if frac := len(s) - len("2006-01-02T15:04:05.Z"); frac > 0 {
		nsec = num(20, frac)
		for range 9 - frac {
			nsec *= 10
		}
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // time.Date normalized a day past the month's end
		return Time{}, false
	}
	return Time{t}, true
}

// wireTimeShape reports whether s is exactly YYYY-MM-DDTHH:MM:SS, then an
// optional '.' with one to three digits, then 'Z'.
func wireTimeShape[S ~string | ~[]byte](s S) bool {
	const base = len("2006-01-02T15:04:05")
	if len(s) < base+1 || len(s) > base+5 || s[len(s)-1] != 'Z' {
		return false
	}
	for i := 0; i < base; i++ {
		c := s[i]
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	frac := s[base : len(s)-1]
	if len(frac) == 0 {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 {
		return false
	}
	for i := 1; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return false
		}
	}
	return true
}

// String returns the wire form.
func (t Time) String() string {
	u := t.Time.UTC().Truncate(time.Millisecond)
	if u.Nanosecond() == 0 {
		return u.Format(wireLayoutSeconds)
	}
	return u.Format(wireLayoutMillis)
}

// MarshalJSON writes the wire form. Sub-millisecond precision is dropped;
// years outside 0000–9999 have no RFC 3339 form and are an error.
func (t Time) MarshalJSON() ([]byte, error) {
	if y := t.Time.UTC().Year(); y < 0 || y > 9999 {
		return nil, Errorf(CodeInternalError, "time year %d is outside 0000–9999", y)
	}
	s := t.String()
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts only a JSON string in the wire form.
func (t *Time) UnmarshalJSON(data []byte) error {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return Errorf(CodeSchemaValidationFailed, "time must be a JSON string, got %.40s", data)
	}
	// The wire form holds no characters that JSON would escape, so the
	// bytes between the quotes are the string itself; an escape sequence
	// fails the shape check.
	if parsed, ok := parseWireTime(data[1 : len(data)-1]); ok {
		*t = parsed
		return nil
	}
	parsed, err := ParseTime(string(data[1 : len(data)-1]))
	if err != nil {
		return err
	}
	*t = parsed
	return nil
}

// MarshalText and UnmarshalText use the wire form too, so a Time never falls
// back to the embedded time.Time encoding (for example as a map key).
func (t Time) MarshalText() ([]byte, error) {
	b, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return b[1 : len(b)-1], nil
}

// UnmarshalText parses the wire form.
func (t *Time) UnmarshalText(data []byte) error {
	parsed, err := ParseTime(string(data))
	if err != nil {
		return err
	}
	*t = parsed
	return nil
}
