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

// flakyHandler copies testdata/jsonlogs/flaky.py into a directory of its
// own, where it keeps its `started` and `go` files.
func flakyHandler(t *testing.T) (handler, dir string) {
	t.Helper()
	dir = t.TempDir()
	handler = filepath.Join(dir, "flaky.py")
	if err := os.WriteFile(handler, mustRead(t, "testdata/jsonlogs/flaky.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	return handler, dir
}

// waitFile waits for the file at path to exist.
func waitFile(t *testing.T, path string, within time.Duration, logs func() string) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("no %s within %s:\n%s", path, within, logs())
		}
	}
}

// touch creates an empty file at path.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// With --log-format json every line that `authority serve`, `coordinator
// run`, `run` and `up` write on stderr is one JSON object with
// enumerations by name and durations in seconds, through a stage whose
// first attempt fails and is run again (a retry), the authority going
// away and coming back while that attempt runs (a disconnection of the
// worker and of the coordinator), and a signal to every process still
// running at the end: the worker, the authority and an `up` whose Mission
// awaits approval, whose last word is an ERROR line, not plain text.
func TestJSONLogsFourCommands(t *testing.T) {
	const plan = "testdata/jsonlogs/flaky.yaml"
	r := newCLIRig(t, "--log-format", "json")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the worker keeps mwpslot.py for the handler
	handler, hdir := flakyHandler(t)
	w := r.startWorker("w1", []string{"--log-format", "json"}, "text.flaky="+handler)
	r.coordArgs = []string{"--log-format", "json"}
	var stopped *proc // the authority before its restart
	r.midway = func() {
		waitFile(t, filepath.Join(hdir, "started"), time.Minute, w.logs)
		stopped = r.stopAuthority()
		// The coordinator is not ready while the authority is away, and
		// ready again once it answers.
		waitReady(t, r.ops, 503, 30*time.Second)
		r.startAuthorityAgain(stopped)
		waitReady(t, r.ops, 200, 30*time.Second)
		w.awaitErr(t, "reconnected to the authority; reconciling", 30*time.Second)
		// The stage cannot end before "go": its metrics show it on its
		// way now, where the rig's later sampling could find it verified.
		waitMetricAtLeast(t, r.ops, `mwp_coordinator_stages{mission="mis-flaky",state="active"}`, 1, 30*time.Second)
		r.seen["active"] = true
		touch(t, filepath.Join(hdir, "go")) // the first attempt fails now
	}
	coord := r.runMission(plan, w)

	// A coordinator whose Mission nobody starts, stopped by a signal: its
	// last word is an ERROR line, not plain text.
	waiting := strings.NewReplacer("mis-flaky", "mis-waiting", "grp-flaky", "grp-waiting").Replace(string(mustRead(t, plan)))
	waitingPlan := filepath.Join(r.dir, "waiting.yaml")
	if err := os.WriteFile(waitingPlan, []byte(waiting), 0o600); err != nil {
		t.Fatal(err)
	}
	idle := startProc(t, r.bin, "coordinator", "run", waitingPlan, "--key", filepath.Join(r.keys, "coord.key"), "--worker", "w1",
		"--authority", r.url, "--authority-fingerprint", r.fp, "--authority-key", r.authPub, "--log-format", "json")
	idle.awaitErr(t, `"msg":"coordinating"`, 15*time.Second)
	if err := idle.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "coordinator run", idle, 1)
	il := jsonLines(t, "coordinator run", idle.stderrText())
	if l := withMsg(il, "coordinator run: mission mis-waiting: stopped before the Mission ended"); len(l) != 1 || l[0]["level"] != "ERROR" {
		t.Fatalf("coordinator run: its last word after a signal is not an ERROR line:\n%s", idle.stderrText())
	}

	stopBySignal(t, "run", w)
	stopBySignal(t, "authority serve", r.auth)

	wl := jsonLines(t, "run", w.stderrText())
	retried := withMsg(wl, "attempt failed; retrying")
	if len(retried) != 1 || retried[0]["level"] != "WARN" || retried[0]["retryIn"] != 0.01 {
		t.Fatalf("run: want one WARN line for the retry, retryIn in seconds:\n%s", w.stderrText())
	}
	if len(withMsg(wl, "disconnected from authority")) != 1 || len(withMsg(wl, "reconnected to the authority; reconciling")) != 1 {
		t.Fatalf("run: want one disconnection and one reconnection for one outage:\n%s", w.stderrText())
	}
	if len(withMsg(wl, "run: stopping at the next safe points (signal again to exit now)")) != 1 {
		t.Fatalf("run: the signal line is not a JSON log line:\n%s", w.stderrText())
	}
	for _, a := range []*proc{stopped, r.auth} {
		if len(withMsg(jsonLines(t, "authority serve", a.stderrText()), "authority log closed")) != 1 {
			t.Fatalf("authority serve: no closing line after its signal:\n%s", a.stderrText())
		}
	}
	cl := jsonLines(t, "coordinator run", coord.stderrText())
	// Its long poll of the Group's events was cut by the restart. One
	// outage is one WARN and one line when it ends, not a line a retry; an
	// answer already on its way as the outage began may split it in two.
	u, a := withMsg(cl, "the authority is unreachable; waiting"), withMsg(cl, "the authority answers again")
	if len(u) == 0 || len(u) > 2 || u[0]["level"] != "WARN" || u[0]["grace"] != 120.0 {
		t.Fatalf("coordinator run: want one WARN line for the outage, grace in seconds:\n%s", coord.stderrText())
	}
	if len(a) != len(u) || a[0]["tries"] == nil {
		t.Fatalf("coordinator run: want one line with a count when the authority answers again:\n%s", coord.stderrText())
	}
	if len(withMsg(cl, "review")) == 0 {
		t.Fatalf("coordinator run: no review line:\n%s", coord.stderrText())
	}

	// up: the same stage fails once, then the Mission awaits approval
	// (no terminal, no --auto-approve) until a signal stops up.
	handler, hdir = flakyHandler(t)
	up := startProc(t, r.bin, "up", plan, "--log-format", "json", "--handler-exec", "text.flaky="+handler)
	waitFile(t, filepath.Join(hdir, "started"), time.Minute, up.logs)
	touch(t, filepath.Join(hdir, "go"))
	up.await(t, regexp.MustCompile(`awaiting approval: mission mis-flaky`), time.Minute)
	if err := up.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "up", up, 1)
	ul := jsonLines(t, "up", up.stderrText())
	if len(withMsg(ul, "attempt failed; retrying")) != 1 {
		t.Fatalf("up: no retry line:\n%s", up.stderrText())
	}
	if l := withMsg(ul, "up: stopped before the Mission ended"); len(l) != 1 || l[0]["level"] != "ERROR" {
		t.Fatalf("up: its last word after a signal is not an ERROR line:\n%s", up.stderrText())
	}
}

// waitReady waits for base's /readyz to answer code.
func waitReady(t *testing.T, base string, code int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		got, body := httpGet(t, base+"/readyz")
		if got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d %q, want %d", got, body, code)
		}
	}
}

// stopBySignal sends p SIGINT and waits for it to exit 0.
func stopBySignal(t *testing.T, who string, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitCode(t, who, p, 0)
}

// waitCode waits for p to exit with code.
func waitCode(t *testing.T, who string, p *proc, code int) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		got := 0
		if ee, ok := err.(*exec.ExitError); ok {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if got != code {
			t.Fatalf("%s after a signal: exit %d, want %d\n%s", who, got, code, p.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on a signal:\n%s", who, p.logs())
	}
}
