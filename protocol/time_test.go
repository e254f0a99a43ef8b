package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestParseTimeAccepts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		out  string // the form MarshalJSON writes back
	}{
		{"2026-11-30T08:00:00Z", time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), "2026-11-30T08:00:00Z"},
		{"2026-11-30T08:00:00.123Z", time.Date(2026, 11, 30, 8, 0, 0, 123e6, time.UTC), "2026-11-30T08:00:00.123Z"},
		{"2026-11-30T08:00:00.120Z", time.Date(2026, 11, 30, 8, 0, 0, 120e6, time.UTC), "2026-11-30T08:00:00.120Z"},
		{"2026-11-30T08:00:00.12Z", time.Date(2026, 11, 30, 8, 0, 0, 120e6, time.UTC), "2026-11-30T08:00:00.120Z"},
		{"2026-11-30T08:00:00.1Z", time.Date(2026, 11, 30, 8, 0, 0, 100e6, time.UTC), "2026-11-30T08:00:00.100Z"},
		{"2026-11-30T08:00:00.000Z", time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), "2026-11-30T08:00:00Z"},
		{"2026-11-30T08:00:00.001Z", time.Date(2026, 11, 30, 8, 0, 0, 1e6, time.UTC), "2026-11-30T08:00:00.001Z"},
		{"2024-02-29T23:59:59.999Z", time.Date(2024, 2, 29, 23, 59, 59, 999e6, time.UTC), "2024-02-29T23:59:59.999Z"},
		{"0000-01-01T00:00:00Z", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), "0000-01-01T00:00:00Z"},
		{"9999-12-31T23:59:59.999Z", time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), "9999-12-31T23:59:59.999Z"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTime(tc.in)
			if err != nil {
				t.Fatalf("ParseTime: %v", err)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("got %v, want %v", got.Time, tc.want)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != `"`+tc.out+`"` {
				t.Fatalf("marshal: got %s, want %q", b, tc.out)
			}
			var back Time
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back != got {
				t.Fatalf("round trip changed %v to %v", got, back)
			}
		})
	}
}

func TestParseTimeRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"2026-11-30T08:00:00",            // no zone
		"2026-11-30T08:00:00+00:00",      // offset instead of Z
		"2026-11-30T09:00:00+01:00",      // non-UTC
		"2026-11-30T08:00:00z",           // lowercase z
		"2026-11-30t08:00:00Z",           // lowercase t
		"2026-11-30 08:00:00Z",           // space separator
		"2026-11-30T08:00:00.Z",          // dot without digits
		"2026-11-30T08:00:00.1234Z",      // four fraction digits
		"2026-11-30T08:00:00.123456789Z", // nanoseconds
		"2026-11-30T08:00Z",              // no seconds
		"2026-11-30",                     // date only
		"26-11-30T08:00:00Z",             // short year
		"+2026-11-30T08:00:00Z",          // signed year
		"2026-13-01T00:00:00Z",           // month 13
		"2026-02-29T00:00:00Z",           // not a leap year
		"2026-04-31T00:00:00Z",           // April 31
		"2026-11-30T24:00:00Z",           // hour 24
		"2026-11-30T08:60:00Z",           // minute 60
		"2026-11-30T08:00:60Z",           // leap second
		"2026-11-30T08:00:00,123Z",       // comma fraction
		"2026-11-30T08:00:0aZ",           // letter in seconds
		"２026-11-30T08:00:00Z",           // non-ASCII digit
		" 2026-11-30T08:00:00Z",          // leading space
		"2026-11-30T08:00:00Z ",          // trailing space
	} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseTime(in)
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeSchemaValidationFailed {
				t.Fatalf("ParseTime(%q) = %v, want SCHEMA_VALIDATION_FAILED", in, err)
			}
			var tm Time
			if err := json.Unmarshal([]byte(`"`+in+`"`), &tm); err == nil {
				t.Fatalf("UnmarshalJSON accepted %q", in)
			}
		})
	}
}

func TestTimeUnmarshalRejectsNonStrings(t *testing.T) {
	for _, in := range []string{`null`, `0`, `1764489600`, `true`, `{}`, `[]`,
		`"2026-11-30T08:00:00\u005a"`} { // an escaped Z is not the wire form
		var tm Time
		err := tm.UnmarshalJSON([]byte(in))
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeSchemaValidationFailed {
			t.Errorf("UnmarshalJSON(%s) = %v, want SCHEMA_VALIDATION_FAILED", in, err)
		}
	}
}

func TestNewTimeNormalizes(t *testing.T) {
	zone := time.FixedZone("X", 5*3600+1800)
	local := time.Date(2026, 11, 30, 13, 30, 0, 123_456_789, zone)
	got := NewTime(local)
	want := Time{time.Date(2026, 11, 30, 8, 0, 0, 123e6, time.UTC)}
	if got != want {
		t.Fatalf("NewTime = %#v, want %#v", got, want)
	}
	if got.String() != "2026-11-30T08:00:00.123Z" {
		t.Fatalf("String = %s", got.String())
	}
	// A reading from the wall clock carries a monotonic component; the wire
	// value must not, or == would compare it.
	now := NewTime(time.Now())
	parsed, err := ParseTime(now.String())
	if err != nil {
		t.Fatal(err)
	}
	if parsed != now {
		t.Fatalf("NewTime(time.Now()) differs from its wire form: %#v vs %#v", now, parsed)
	}
}

func TestTimeMarshalTruncatesSubMillisecond(t *testing.T) {
	// A Time built without NewTime still marshals in the wire form.
	raw := Time{time.Date(2026, 11, 30, 8, 0, 0, 999_999, time.FixedZone("Y", -3600))}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"2026-11-30T09:00:00Z"` {
		t.Fatalf("got %s", b)
	}
}

func TestTimeMarshalRejectsYearsWithoutRFC3339Form(t *testing.T) {
	for _, y := range []int{-1, 10000} {
		_, err := json.Marshal(Time{time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err == nil {
			t.Errorf("year %d marshalled", y)
		}
	}
}

func TestTimeText(t *testing.T) {
	tm := NewTime(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC))
	b, err := tm.MarshalText()
	if err != nil || string(b) != "2026-01-02T03:04:05.006Z" {
		t.Fatalf("MarshalText = %s, %v", b, err)
	}
	var back Time
	if err := back.UnmarshalText(b); err != nil || back != tm {
		t.Fatalf("UnmarshalText = %v, %v", back, err)
	}
	if err := back.UnmarshalText([]byte("2026-01-02T03:04:05+00:00")); err == nil {
		t.Fatal("UnmarshalText accepted an offset")
	}
	// As a map key the wire form is used, not time.Time's RFC 3339 Nano.
	m, err := json.Marshal(map[Time]int{tm: 1})
	if err != nil || string(m) != `{"2026-01-02T03:04:05.006Z":1}` {
		t.Fatalf("map key: %s, %v", m, err)
	}
}

func TestTimeOmitzero(t *testing.T) {
	type holder struct {
		At Time `json:"at,omitzero"`
	}
	b, err := json.Marshal(holder{})
	if err != nil || string(b) != `{}` {
		t.Fatalf("zero: %s, %v", b, err)
	}
	var h holder
	if err := json.Unmarshal([]byte(`{"at":"2026-11-30T08:00:00Z"}`), &h); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h.At, NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))) {
		t.Fatalf("got %#v", h.At)
	}
}

// parseTimeGeneral is ParseTime without its fast path.
func parseTimeGeneral(s string) (Time, bool) {
	if !wireTimeShape(s) {
		return Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Time{}, false
	}
	return Time{t.UTC()}, true
}

// parseWireTime takes only what time.Parse accepts, and gives the same
// value, down to the bits == compares.
func TestParseWireTime(t *testing.T) {
	cases := []struct {
		s    string
		fast bool
	}{
		{"2026-11-30T08:00:00Z", true},
		{"2026-11-30T08:00:00.1Z", true},
		{"2026-11-30T08:00:00.12Z", true},
		{"2026-11-30T08:00:00.123Z", true},
		{"2026-11-30T23:59:59.999Z", true},
		{"0000-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59Z", true},
		{"2024-02-29T00:00:00Z", true},
		{"2000-02-29T00:00:00Z", true},
		{"1900-02-29T00:00:00Z", false},
		{"2023-02-29T00:00:00Z", false},
		{"2026-04-31T00:00:00Z", false},
		{"2026-06-30T00:00:00Z", true},
		{"2026-01-31T00:00:00Z", true},
		{"2026-12-32T00:00:00Z", false},
		{"2026-00-10T00:00:00Z", false},
		{"2026-13-10T00:00:00Z", false},
		{"2026-11-00T00:00:00Z", false},
		{"2026-11-30T24:00:00Z", false},
		{"2026-11-30T08:60:00Z", false},
		{"2026-11-30T08:00:60Z", false},
		{"2026-11-30T08:00:00.1234Z", false},
		{"2026-11-30T08:00:00.Z", false},
		{"2026-11-30T08:00:00+00:00", false},
		{"2026-11-30 08:00:00Z", false},
		{"", false},
	}
	for _, tc := range cases {
		got, ok := parseWireTime(tc.s)
		gotBytes, okBytes := parseWireTime([]byte(tc.s))
		want, wantOK := parseTimeGeneral(tc.s)
		if ok != tc.fast || okBytes != ok {
			t.Errorf("parseWireTime(%q) ok = %v (bytes %v), want %v", tc.s, ok, okBytes, tc.fast)
		}
		if ok && (!wantOK || got != want || gotBytes != want) {
			t.Errorf("parseWireTime(%q) = %v, time.Parse gives %v (ok %v)", tc.s, got, want, wantOK)
		}
	}
	// Every month's last day is read, the day after it is not.
	for m := time.January; m <= time.December; m++ {
		for _, y := range []int{1900, 2000, 2023, 2024} {
			last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			for d, want := range map[int]bool{last: true, last + 1: false} {
				s := fmt.Sprintf("%04d-%02d-%02dT00:00:00Z", y, m, d)
				if _, ok := parseWireTime(s); ok != want {
					t.Errorf("parseWireTime(%q) ok = %v, want %v", s, ok, want)
				}
			}
		}
	}
}

func FuzzParseWireTime(f *testing.F) {
	f.Add("2026-11-30T08:00:00.120Z")
	f.Add("2024-02-29T23:59:59Z")
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseWireTime(s)
		if !ok {
			return
		}
		if want, wantOK := parseTimeGeneral(s); !wantOK || got != want {
			t.Fatalf("parseWireTime(%q) = %v, time.Parse gives %v (ok %v)", s, got, want, wantOK)
		}
	})
}
