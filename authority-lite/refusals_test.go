package authoritylite

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Refusals are all at DEBUG; at INFO one line per code per window, with
// the count since the last line.
func TestRefusalLogSamples(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var l refusalLog
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	stale := protocol.Errorf(protocol.CodeMembershipStale, "stale")
	limited := protocol.Errorf(protocol.CodeRateLimited, "slow down")
	for i, tc := range []struct {
		at   time.Duration
		err  error
		want string // the INFO line's count, or "" for none
	}{
		{0, stale, "count=1"},
		{time.Second, stale, ""},
		{2 * time.Second, limited, "count=1"},
		{9 * time.Second, stale, ""},
		{10 * time.Second, stale, "count=3"},
		{11 * time.Second, limited, ""},
		{25 * time.Second, limited, "count=2"},
	} {
		buf.Reset()
		l.refused(log, t0.Add(tc.at), protocol.CmdWorkStart, tc.err)
		got := strings.TrimSpace(buf.String())
		if tc.want == "" {
			if got != "" {
				t.Errorf("%d: logged %q, want nothing", i, got)
			}
			continue
		}
		if !strings.Contains(got, "commands refused") || !strings.Contains(got, tc.want) || !strings.Contains(got, string(protocol.CodeOf(tc.err))) {
			t.Errorf("%d: logged %q, want a line with %s", i, got, tc.want)
		}
	}
}
