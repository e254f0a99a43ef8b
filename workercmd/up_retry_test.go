package workercmd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

const flakyPlan = `version: 1
mission:
  id: mis-flaky
  groupId: grp-flaky
  title: A flaky stage
  objective: Retry a failed attempt within the lease.
  deadline: 1h
approval:
  approvers: [owner]
  instructions: The note says which attempt wrote it.
stages:
  - id: flaky
    goal: Fail once, then write a note.
    capability: {id: text.flaky, version: 1.x}
    acceptance:
      - id: noted
        description: The note was written.
        evidence: [the note]
    outputs:
      - {name: note, mediaType: text/plain}
    budgets: {toolCalls: 10, wallClockSeconds: 600}
    retry: {maxAttempts: 2, backoff: {initialMs: 10, maxMs: 10}}
`

// flaky fails its first attempt, then writes a note; it records the
// attempt each run was told.
type flaky struct {
	runs     atomic.Int32
	attempts [2]atomic.Uint64
}

func (*flaky) Capability() protocol.Capability {
	return protocol.Capability{ID: "text.flaky", Version: "1.0.0"}
}

func (h *flaky) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	n := h.runs.Add(1)
	if n <= 2 {
		h.attempts[n-1].Store(w.Attempt())
	}
	if n == 1 {
		return slots.Result{}, errors.New("tool crashed:\nexit status 3")
	}
	d, err := w.PublishArtifact(ctx, "text/plain", []byte("written\n"))
	if err != nil {
		return slots.Result{}, err
	}
	return slots.Result{Artifacts: []string{d}, Evidence: w.Evidence(map[string]slots.EvidenceCheck{
		"the note": {Result: protocol.EvidencePass, Method: "wrote it", Artifacts: []string{d}}})}, nil
}

// `up` prints a failed attempt the retry policy runs again, which the
// Mission's log never shows, as a progress line of its own, and the stage
// then succeeds under the same lease.
func TestUpPrintsRetry(t *testing.T) {
	defer slog.SetDefault(slog.Default()) // Main makes its logger the default
	planFile := filepath.Join(t.TempDir(), "flaky.yaml")
	if err := os.WriteFile(planFile, []byte(flakyPlan), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	h := &flaky{}
	code := Run(context.Background(), []string{"prog", "up", planFile, "--auto-approve", "--data", t.TempDir(), "--log-level", "error"},
		&out, &errb, h)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	want := "stage flaky retrying: attempt 1 failed: tool crashed: exit status 3\n"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "mission mis-flaky approved\n") {
		t.Fatalf("stdout:\n%s\nwant the line %q and the Mission approved", out.String(), want)
	}
	if n := h.runs.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	if a, b := h.attempts[0].Load(), h.attempts[1].Load(); a != 1 || b != 2 {
		t.Fatalf("the handler was told attempts %d and %d, want 1 and 2", a, b)
	}
}
