package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/poc"
)

// runCLI runs the binary to its end (bounded) and returns its output and
// exit code.
func runPocCLI(t *testing.T, bin string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not end within its bound (it hangs)", args)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run %v: %v", args, err)
	return "", "", 0
}

// awaitPending polls the running poc's approval API until mission awaits
// approval.
func awaitPending(t *testing.T, p *proc, dir, mission string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := poc.ReadAPIClient(dir); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			list, err := c.Pending(ctx)
			cancel()
			for _, m := range list {
				if err == nil && m.MissionID == mission {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never awaited approval; poc output:\n%s", mission, p.logs())
}

// TestPocApproveScripted drives a real `poc --data DIR --faults
// change-request` run (no --auto-approve) to its end with `poc approve
// --decision` alone: a request for changes (which is the fault, injected
// by the human), the approvals, and the refusals a script can meet, each
// one line on stderr with a non-zero exit, none waiting on stdin.
func TestPocApproveScripted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the proof of concept")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	refuse := func(stdin io.Reader, want string, args ...string) {
		t.Helper()
		out, errOut, code := runPocCLI(t, bin, stdin, append([]string{"poc", "approve", "--data", dir}, args...)...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		// A usage error (exit 2) is named the way every command names one.
		if code == 0 || len(lines) != 1 || !(strings.HasPrefix(lines[0], "poc approve: ") || strings.HasPrefix(lines[0], "mwp-worker poc approve: ")) || !strings.Contains(lines[0], want) {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q (stdout %q)", args, code, errOut, want, out)
		}
	}
	// Refused before anything is read or sent.
	refuse(nil, "want MISSION, got 0 arguments", "--decision", "approve")
	refuse(nil, "--decision must be approve or request-changes", "--decision", "maybe", "mis-a")
	refuse(nil, "needs --comment with at least one change", "--decision", "request-changes", "--comment", " ", "mis-a")
	refuse(nil, "--comment needs --decision", "--comment", "x", "mis-a")
	refuse(strings.NewReader("a\n\n"), "stdin is not a terminal", "mis-a") // a pipe
	refuse(nil, "stdin is not a terminal", "mis-a")                        // /dev/null
	refuse(nil, "no running proof of concept", "--decision", "approve", "mis-a")

	// With a human, the change-request fault is the MissionOwner's own
	// request for changes: here, the scripted one.
	p := startProc(t, bin, "poc", "--data", dir, "--json", "--faults", "change-request", "--timeout", "3m")
	awaitPending(t, p, dir, "mis-a")
	out, errOut, code := runPocCLI(t, bin, nil, "poc", "approve", "--data", dir, "--decision", "request-changes",
		"--comment", "document Clamp in the README\nkeep the old API", "mis-a")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "mission mis-a: mission.request_changes accepted, event ") {
		t.Fatalf("request changes: exit %d\n%s%s", code, out, errOut)
	}
	refuse(nil, "not awaiting approval", "--decision", "approve", "mis-a") // being reworked
	awaitPending(t, p, dir, "mis-b")
	if out, errOut, code := runPocCLI(t, bin, nil, "poc", "approve", "--data", dir, "--decision", "approve", "--comment", "fine", "mis-b"); code != 0 ||
		strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "mission mis-b: mission.approve accepted") {
		t.Fatalf("approve mis-b: exit %d\n%s%s", code, out, errOut)
	}
	awaitPending(t, p, dir, "mis-a") // the rework resubmitted
	// Asked on a terminal (a pipe stands in for it), poc approve shows
	// package review's review, as up and mission status do.
	out = approveAtTerminal(t, dir, "mis-a", "a\nreworked as asked\n")
	for _, want := range []string{"\nstage ", "  evidence  [", "  output    ", "  review    ", "\nsummary: ",
		"Approve, request changes, or quit? [a/r/q]: ", "Accepted: mission.approve"} {
		if !strings.Contains(out, want) {
			t.Fatalf("interactive approve of mis-a: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "Evidence (") {
		t.Fatalf("interactive approve shows the approval projection, not the review:\n%s", out)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("poc: %v\n%s", err, p.logs())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("poc did not end after both approvals:\n%s", p.logs())
	}
	var rep struct {
		OK        bool `json:"ok"`
		Approvals []struct {
			Mission, Decision string
		} `json:"approvals"`
		Faults []struct {
			Name           string
			Injected, Held bool
		} `json:"faults"`
	}
	if err := json.Unmarshal([]byte(p.stdout()), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, p.stdout())
	}
	var got []string
	for _, a := range rep.Approvals {
		got = append(got, a.Mission+":"+a.Decision)
	}
	if !rep.OK || strings.Join(got, ",") != "mis-a:changes_requested,mis-a:approved,mis-b:approved" {
		t.Fatalf("ok %v approvals %v\n%s", rep.OK, got, p.logs())
	}
	if len(rep.Faults) != 1 || rep.Faults[0].Name != "change-request" || !rep.Faults[0].Injected || !rep.Faults[0].Held {
		t.Fatalf("faults %+v\n%s", rep.Faults, p.logs())
	}
}

// approveAtTerminal runs `poc approve --data dir mission` in this process
// with answer on a pipe standing in for its terminal, and returns stdout.
func approveAtTerminal(t *testing.T, dir, mission, answer string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString(answer); err != nil {
		t.Fatal(err)
	}
	w.Close()
	stdin, isTerm := os.Stdin, isTerminal
	os.Stdin, isTerminal = r, func(in io.Reader) bool { return in == r }
	defer func() { os.Stdin, isTerminal = stdin, isTerm }()
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"mwp-worker", "poc", "approve", "--data", dir, mission}, &out, &errb); code != 0 {
		t.Fatalf("poc approve %s at a terminal: exit %d\n%s%s", mission, code, out.String(), errb.String())
	}
	return out.String()
}
