package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Two signals while an external handler runs (one that ignores the
// preemption request and has a child of its own): the first asks for a
// safe point, the second exits at once with status 130, and neither the
// handler nor its child is left running.
func TestRunSecondSignalLeavesNoHandler(t *testing.T) {
	// The pid directory reaches the script as its argument, a comma and
	// a blank in it: --handler-exec takes a command line.
	pids := filepath.Join(t.TempDir(), "pids, here")
	if err := os.Mkdir(pids, 0o700); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "stubborn.sh")
	body := `#!/bin/sh
read start
sleep 300 &
echo $$ > "$1/handler.tmp" && mv "$1/handler.tmp" "$1/handler"
echo $! > "$1/child.tmp" && mv "$1/child.tmp" "$1/child"
while :; do sleep 1; done
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	k := newCluster(t, "--slots", "1", "--handler-exec", fmt.Sprintf("demo.steps@1.0.0=%s '%s'", script, pids))
	k.offer("wi-1")
	handler, child := readPID(t, filepath.Join(pids, "handler")), readPID(t, filepath.Join(pids, "child"))
	if !alive(handler) || !alive(child) {
		t.Fatal("the handler is not running")
	}

	if err := k.worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	k.worker.awaitErr(t, "stopping at the next safe points", 10*time.Second)
	if err := k.worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := k.waitExit(k.worker, 10*time.Second); code != 130 {
		t.Fatalf("exit %d after two signals, want 130:\n%s", code, k.worker.logs())
	}
	if !strings.Contains(k.worker.logs(), "second signal: killed the running handler process groups") || !strings.Contains(k.worker.logs(), "killed=1") {
		t.Fatalf("the exit does not say what it killed:\n%s", k.worker.logs())
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(handler) || alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("left running after the worker exited: handler %d %v, its child %d %v", handler, alive(handler), child, alive(child))
		}
		time.Sleep(10 * time.Millisecond)
	}
	k.stop()
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s: the handler never started", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// SIGTERM before the worker ever reached its authority is a clean stop:
// exit 0 and a line saying so, not "context canceled" and status 1.
func TestRunSignalBeforeConnecting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	writeKey(t, filepath.Join(dir, "keys"), "w1", protocol.ActorAgent, "w1")
	w := startProc(t, bin, "run", "--data", filepath.Join(dir, "worker"), "--key", filepath.Join(dir, "keys", "w1.key"),
		"--authority", "wss://127.0.0.1:1/mwp", "--authority-fingerprint", "sha256:"+strings.Repeat("0", 64), "--group", "grp-a")
	w.awaitErr(t, "connecting to", 10*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			t.Fatalf("exit %v, want 0:\n%s", err, w.logs())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", w.logs())
	}
	if !strings.Contains(w.stdout(), "stopped by a signal before a session opened") || strings.Contains(w.logs(), "context canceled") {
		t.Fatalf("output:\n%s", w.logs())
	}
}
