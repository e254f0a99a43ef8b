package workercmd

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Go program's `up` without --auto-approve asks on its terminal, as
// `mwp-worker up` does: it shows package review's review of each stage,
// reads the decision from stdin and ends approved. A pipe stands in for
// the terminal.
func TestUpAsksTerminal(t *testing.T) {
	defer slog.SetDefault(slog.Default()) // Main makes its logger the default
	planFile := filepath.Join(t.TempDir(), "flaky.yaml")
	if err := os.WriteFile(planFile, []byte(flakyPlan), 0o600); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("approve\nlooks right\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	stdin, isTerm := os.Stdin, inIsTerminal
	os.Stdin, inIsTerminal = r, func(in io.Reader) bool { return in == r }
	defer func() { os.Stdin, inIsTerminal = stdin, isTerm }()

	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"prog", "up", planFile, "--data", t.TempDir(), "--log-level", "error"}, &out, &errb, &flaky{})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"\nstage mis-flaky:flaky: verified\n",
		"  evidence  [pass] ",
		"  output    note (text/plain, 8 bytes): written\n",
		"  review    ",
		"Approve, request changes, or quit? [a/r/q]: ",
		"Accepted: mission.approve\n",
		"mission mis-flaky approved\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in stdout:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "awaiting approval: mission") {
		t.Fatalf("up waited instead of asking:\n%s", out.String())
	}
}
