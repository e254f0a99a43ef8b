package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestMultiProcessPlanMissionCLIOnly is issue 13's path with nothing but
// the CLI: `authority serve`; a worker and a coordinator enrolled while it
// runs (`authority enroll`); `run` with the example Python handler and no
// --group; `coordinator run PLAN`; `mission start PLAN`; `mission approve`.
// The Mission ends approved in the log and no process was restarted.
func TestMultiProcessPlanMissionCLIOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	planFile, err := filepath.Abs("../../examples/plans/echo-hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	writeKey(t, keys, "policy", protocol.ActorService, "org-policy")
	writeKey(t, keys, "owner", protocol.ActorHuman, "owner") // the plan's approver
	writeKey(t, keys, "w1", protocol.ActorAgent, "w1")
	ck := writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	authDir, workerDir := filepath.Join(dir, "authority"), filepath.Join(dir, "worker")
	auth := startProc(t, bin, "authority", "serve", "--data", authDir, "--listen", "127.0.0.1:0", "--closed-registration",
		"--policy", "org-policy="+filepath.Join(keys, "policy.pub"), "--human", "owner="+filepath.Join(keys, "owner.pub"))
	url := auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	fp := auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]
	authPub := filepath.Join(authDir, "authority.pub")

	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "MWP_AUTHORITY="+url, "MWP_AUTHORITY_FINGERPRINT="+fp, "MWP_AUTHORITY_KEY="+authPub)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}
	// Enrol both agents with the running authority.
	wEnroll := filepath.Join(dir, "w1-enroll.json")
	if out, code := run("run", "--data", workerDir, "--key", filepath.Join(keys, "w1.key"), "--enrollment", wEnroll,
		"--handler-exec", "echo.run="+handler); code != 0 {
		t.Fatalf("run --enrollment: exit %d\n%s", code, out)
	}
	cEnroll, _ := coordinatorEnrollment(t, dir, ck)
	for _, e := range []string{wEnroll, cEnroll} {
		if out, code := run("authority", "enroll", "--data", authDir, "--policy-key", filepath.Join(keys, "policy.key"), e); code != 0 {
			t.Fatalf("authority enroll %s: exit %d\n%s", e, code, out)
		}
	}

	worker := startProc(t, bin, "run", "--data", workerDir, "--key", filepath.Join(keys, "w1.key"), "--authority", url,
		"--authority-fingerprint", fp, "--authority-key", authPub, "--handler-exec", "echo.run="+handler)
	worker.await(t, regexp.MustCompile(`agent w1 session 1 open`), 15*time.Second)
	coord := startProc(t, bin, "coordinator", "run", planFile, "--key", filepath.Join(keys, "coord.key"), "--worker", "w1",
		"--authority", url, "--authority-fingerprint", fp, "--authority-key", authPub)

	owner := filepath.Join(keys, "owner.key")
	if out, code := run("mission", "start", planFile, "--owner-key", owner, "--coordinator", "coord"); code != 0 ||
		out != "mission mis-echo-hello group grp-echo-hello\n" {
		t.Fatalf("mission start: exit %d\n%s", code, out)
	}
	state := func() string {
		out, code := run("mission", "status", "mis-echo-hello", "--owner-key", owner, "--json")
		var s missionStatus
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
			t.Fatalf("mission status: exit %d\n%s", code, out)
		}
		return string(s.State)
	}
	for deadline := time.Now().Add(60 * time.Second); state() != "awaiting_approval"; {
		if time.Now().After(deadline) {
			t.Fatalf("the Mission never awaited approval; coordinator:\n%s\nworker:\n%s", coord.logs(), worker.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, code := run("mission", "approve", "mis-echo-hello", "--owner-key", owner, "--comment", "looks right"); code != 0 ||
		!strings.HasPrefix(out, "mission mis-echo-hello approved event ") {
		t.Fatalf("mission approve: exit %d\n%s", code, out)
	}
	select {
	case err := <-coord.done:
		coord.done <- err
		if err != nil || !strings.Contains(coord.stdout(), "mission mis-echo-hello approved\n") {
			t.Fatalf("coordinator run: %v\n%s", err, coord.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("coordinator run did not end with the Mission approved:\n%s", coord.logs())
	}
	if s := state(); s != "approved" {
		t.Fatalf("Mission %s in the log, want approved", s)
	}
	for name, p := range map[string]*proc{"authority": auth, "worker": worker} {
		select {
		case err := <-p.done:
			t.Fatalf("%s exited (%v): nothing may restart\n%s", name, err, p.logs())
		default:
		}
	}
}
