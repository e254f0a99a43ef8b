package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime"
)

// A running item's slot line names the attempt running now: a retry
// within one lease shows nowhere else.
func TestPrintStatusAttempt(t *testing.T) {
	st := statusView{AgentID: "w1", Slots: 1, Running: []runtime.RunStatus{{GroupID: "grp-a", WorkItemID: "wi-1", LeaseID: "lease-1",
		LeaseExpiresAt: time.Date(2026, 12, 2, 0, 10, 0, 0, time.UTC), Renewals: 1, Attempt: 2}}}
	var b bytes.Buffer
	printStatus(&b, queue.Live{PID: 42}, st)
	want := "  slot 0: grp-a/wi-1 attempt 2, lease lease-1 until 2026-12-02T00:10:00Z (1 renewals)\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("status:\n%s\nwant the line %q", b.String(), want)
	}
}
