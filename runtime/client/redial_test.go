package client

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// An outage reads as one line when it starts and one per doubling of the
// failed redials, each with the count: not a "disconnected" line per dial.
func TestRedialLogLines(t *testing.T) {
	for _, tc := range []struct {
		name        string
		established []bool
		want        []string
	}{
		{"a connection ends, then nine redials fail", []bool{true, false, false, false, false, false, false, false, false, false},
			[]string{"disconnected from authority", "authority still unreachable attempts=2", "authority still unreachable attempts=4", "authority still unreachable attempts=8"}},
		{"the first dial fails", []bool{false, false, false},
			[]string{"could not connect to the authority; retrying with back-off", "authority still unreachable attempts=2"}},
		{"back, then down again", []bool{true, false, false, true, false},
			[]string{"disconnected from authority", "authority still unreachable attempts=2", "disconnected from authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == "time" || a.Key == "level" || a.Key == "err" {
					return slog.Attr{}
				}
				return a
			}}))
			var r redialLog
			for _, e := range tc.established {
				r.failed(log, e, errors.New("refused"))
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				l = strings.TrimPrefix(l, "msg=")
				l = strings.ReplaceAll(l, `"`, "")
				got = append(got, l)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
