package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// `up` runs the example plans with the example Python handler, in a real
// process, to an approved Mission; a plan whose check fails ends with the
// Mission terminated, exit 1 and the reason on one line.
func TestUpRunsExamplePlans(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	bin := buildBinary(t)
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(t.TempDir(), "failing.yaml")
	raw, err := os.ReadFile("../../examples/plans/echo-hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), `"import json; json.load(open('echo.json')); print('ok')"`, `"import sys; sys.exit(3)"`, 1)
	if bad == string(raw) {
		t.Fatal("the failing plan is the same as the example")
	}
	if err := os.WriteFile(failing, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plan     string
		exit     int
		state    protocol.MissionState
		stderrRe string
	}{
		{plan: "../../examples/plans/echo-hello.yaml", state: protocol.MissionApproved},
		{plan: "../../examples/plans/echo-pipeline.yaml", state: protocol.MissionApproved},
		{plan: failing, exit: 1, state: protocol.MissionTerminated, stderrRe: "up: mission mis-echo-hello terminated: stage echo failed 1 time(s)"},
	} {
		t.Run(filepath.Base(tc.plan), func(t *testing.T) {
			data := t.TempDir()
			p := startProc(t, bin, "up", tc.plan, "--auto-approve", "--data", data, "--log-level", "warn",
				"--handler-exec", "echo.run="+handler)
			var code int
			select {
			case err := <-p.done:
				p.done <- err
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("up did not end:\n%s", p.logs())
			}
			if code != tc.exit {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.exit, p.logs())
			}
			if tc.stderrRe != "" && !strings.Contains(p.logs(), tc.stderrRe) {
				t.Fatalf("no %q:\n%s", tc.stderrRe, p.logs())
			}
			pl, err := plan.Parse("x", mustRead(t, tc.plan))
			if err != nil {
				t.Fatal(err)
			}
			want := "mission " + pl.Mission.ID + " " + string(tc.state) + "\n"
			if !strings.Contains(p.stdout(), want) {
				t.Fatalf("no progress line %q:\n%s", want, p.stdout())
			}
			// The log itself says how the Mission ended.
			svc, err := authoritylite.Open(authoritylite.Config{Dir: filepath.Join(data, "authority")})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			if m, ok := svc.Mission(pl.Mission.GroupID); !ok || m.State != tc.state {
				t.Fatalf("the log has the Mission %s, want %s", m.State, tc.state)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// up refuses, before starting anything, a plan it could not finish: a
// stage no handler provides, or a bad plan (its problems with lines).
func TestUpRefusesWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "no handler for a stage", args: []string{"up", "../../examples/plans/bugfix.yaml", "--data", t.TempDir()},
			code: 1, want: "up: stage analyze needs capability code.analyze 1.x, and the handlers provide demo.steps@1.0.0"},
		{name: "no plan", args: []string{"up"}, code: 2, want: "mwp-worker up: want PLAN, got 0 arguments"},
		{name: "a bad plan", args: []string{"up", writeTemp(t, `{"version": 2}`)}, code: 1, want: ":1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// `up --handler-clarify` asks the example handler about each offered
// contract before the worker accepts it, in its own short run: a contract
// it can act on runs to approval; one asking for an output it cannot write
// gets its question raised and is not accepted.
func TestUpHandlerClarify(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	bin := buildBinary(t)
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	raw := string(mustRead(t, "../../examples/plans/echo-hello.yaml"))
	ambiguous := strings.Replace(raw, "{name: echo, mediaType: application/json}", "{name: echo, mediaType: text/plain}", 1)
	if ambiguous == raw {
		t.Fatal("the ambiguous plan is the same as the example")
	}
	ambiguousPlan := filepath.Join(t.TempDir(), "ambiguous.yaml")
	if err := os.WriteFile(ambiguousPlan, []byte(ambiguous), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("clear", func(t *testing.T) {
		p := startProc(t, bin, "up", "../../examples/plans/echo-hello.yaml", "--auto-approve", "--data", t.TempDir(),
			"--log-level", "debug", "--handler-exec", "echo.run="+handler, "--handler-clarify", "echo.run")
		select {
		case err := <-p.done:
			p.done <- err
			if err != nil {
				t.Fatalf("up: %v\n%s", err, p.logs())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("up did not end:\n%s", p.logs())
		}
		if !strings.Contains(p.logs(), "asking the handlers about an offered contract") || !strings.Contains(p.stdout(), "mission mis-echo-hello approved") {
			t.Fatalf("not asked, or not approved:\n%s", p.logs())
		}
	})
	t.Run("ambiguous", func(t *testing.T) {
		p := startProc(t, bin, "up", ambiguousPlan, "--auto-approve", "--data", t.TempDir(),
			"--handler-exec", "echo.run="+handler, "--handler-clarify", "echo.run")
		want := "output echo is text/plain: echo writes only application/json"
		deadline := time.Now().Add(2 * time.Minute)
		for !strings.Contains(p.logs(), want) {
			select {
			case err := <-p.done:
				t.Fatalf("up ended (%v) before the question:\n%s", err, p.logs())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no question raised:\n%s", p.logs())
			}
		}
		if strings.Contains(p.stdout(), "stage echo active") {
			t.Fatalf("the ambiguous stage ran:\n%s", p.stdout())
		}
	})
}
