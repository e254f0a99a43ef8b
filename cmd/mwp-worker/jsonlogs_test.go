package main

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// jsonLines checks that every line of a process's stderr is a JSON object
// whose enumerations are names and durations seconds, and returns them.
func jsonLines(t *testing.T, who, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: a log line is not JSON (%v): %s", who, err, l)
		}
		for _, k := range []string{"outcome", "state", "level"} {
			if v, ok := m[k]; ok {
				if _, isString := v.(string); !isString {
					t.Fatalf("%s: %s is %v, want its name: %s", who, k, v, l)
				}
			}
		}
		if v, ok := m["offlineFor"].(float64); ok && v > 3600 {
			t.Fatalf("%s: offlineFor %v is not seconds: %s", who, v, l)
		}
		out = append(out, m)
	}
	return out
}

func withMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, m := range lines {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// With --log-format json every line `run` and `authority serve` log is one
// JSON object, through a run, the authority going away (a disconnection
// and redials), its return and a signal: no plain-text line, enums by name.
func TestJSONLogsEveryLine(t *testing.T) {
	k := newCluster(t, "--log-format", "json", "--slots", "1", "--demo-step", "50ms")
	k.offer("wi-1")
	k.co.waitState("wi-1", protocol.WorkSubmitted)

	// The authority goes away: the worker logs the disconnection once and
	// its failed redials with a count; then it comes back logging JSON.
	if err := k.auth.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	k.waitExit(k.auth, 10*time.Second)
	k.worker.awaitErr(t, `"attempts":2`, 30*time.Second)
	u, err := url.Parse(k.workerArgs[slices.Index(k.workerArgs, "--authority")+1])
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(k.authArgs), "--log-format", "json")
	args[slices.Index(args, "--listen")+1] = u.Host
	k.auth = startProc(t, k.bin, args...)
	k.auth.await(t, regexp.MustCompile(`listening on wss://`), 10*time.Second)
	k.worker.awaitErr(t, "reconnected to the authority; reconciling", 30*time.Second)

	if err := k.worker.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := k.waitExit(k.worker, 15*time.Second); code != 0 {
		t.Fatalf("worker exit %d:\n%s", code, k.worker.logs())
	}
	k.stop()

	k.worker.mu.Lock()
	werr := k.worker.errb.String()
	k.worker.mu.Unlock()
	w := jsonLines(t, "run", werr)
	if ended := withMsg(w, "run ended"); len(ended) == 0 || ended[0]["outcome"] != "completed" {
		t.Fatalf("run: no run ended with outcome completed:\n%s", werr)
	}
	if len(withMsg(w, "disconnected from authority")) != 1 {
		t.Fatalf("run: want one disconnected line for one outage:\n%s", werr)
	}
	if r := withMsg(w, "reconnected to the authority; reconciling"); len(r) != 1 {
		t.Fatalf("run: no reconnection line:\n%s", werr)
	} else if _, ok := r[0]["offlineFor"].(float64); !ok {
		t.Fatalf("run: offlineFor is not a number of seconds: %v", r[0])
	}
	if len(withMsg(w, "run: stopping at the next safe points (signal again to exit now)")) != 1 {
		t.Fatalf("run: the signal line is not a JSON log line:\n%s", werr)
	}
	k.auth.mu.Lock()
	aerr := k.auth.errb.String()
	k.auth.mu.Unlock()
	a := jsonLines(t, "authority serve", aerr)
	if len(withMsg(a, "authority log closed")) != 1 {
		t.Fatalf("authority serve: no closing line:\n%s", aerr)
	}
}

// A fresh `up` logs JSON only, nothing at WARN or ERROR and no error (a
// refused first HELLO) on its way to an approved Mission, and leaves no
// temporary data directory behind.
func TestUpHealthyStartIsQuiet(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	bin := buildBinary(t)
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(bin, "up", "../../examples/plans/echo-pipeline.yaml", "--auto-approve", "--log-format", "json",
		"--handler-exec", "echo.run="+handler)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("up: %v\n%s%s", err, out, stderr.String())
	}
	for _, m := range jsonLines(t, "up", stderr.String()) {
		if e, _ := m["err"].(string); m["level"] == "WARN" || m["level"] == "ERROR" || e != "" {
			t.Fatalf("a healthy up logged %v:\n%s", m, stderr.String())
		}
	}
	if !strings.Contains(string(out), "mission mis-echo-pipeline approved") {
		t.Fatalf("not approved:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "mwp-up-*")); len(left) != 0 {
		t.Fatalf("up left its temporary data directory: %v", left)
	}
}
