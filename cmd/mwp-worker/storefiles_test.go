package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBin runs the binary to completion (bounded) and returns its exit code
// and output streams.
func runBin(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%v: %v", args, err)
	return 0, "", ""
}

var logLineRe = regexp.MustCompile(`(?m)^log (log-[0-9a-f]{32}) created `)

// serveOnce starts `authority serve`, waits for it to print its log id,
// stops it with SIGTERM and returns the id.
func serveOnce(t *testing.T, bin, dir string, extra ...string) string {
	t.Helper()
	p := startProc(t, bin, append([]string{"authority", "serve", "--data", dir, "--listen", "127.0.0.1:0"}, extra...)...)
	id := p.await(t, logLineRe, 30*time.Second)[1]
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("serve exited with %v:\n%s", err, p.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", p.logs())
	}
	return id
}

// TestMultiProcessAuthorityRefusesLostLog: an authority whose log was
// truncated (or removed) beside its key refuses to start, with one coded
// line naming both files and a non-zero exit; --init starts a new log
// once, and later starts need no flag.
func TestMultiProcessAuthorityRefusesLostLog(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	first := serveOnce(t, bin, dir)
	if again := serveOnce(t, bin, dir); again != first {
		t.Fatalf("restart opened log %s, the first start created %s", again, first)
	}
	logPath, keyPath := filepath.Join(dir, "authority.db"), filepath.Join(dir, "authority.key")
	refused := func(reason string, args ...string) {
		t.Helper()
		code, out, stderr := runBin(t, bin, append([]string{"authority", "serve", "--data", dir, "--listen", "127.0.0.1:0"}, args...)...)
		if code == 0 || strings.Contains(out, "listening") {
			t.Fatalf("%s: exit %d, stdout %q", reason, code, out)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "authority serve: INTERNAL_ERROR: "+reason+": ") || !strings.Contains(lines[0], logPath) {
			t.Fatalf("%s: stderr %q", reason, stderr)
		}
		if reason != "LOG_EXISTS" && !strings.Contains(lines[0], keyPath) {
			t.Fatalf("%s: stderr does not name %s: %q", reason, keyPath, stderr)
		}
	}
	if err := os.Truncate(logPath, 0); err != nil {
		t.Fatal(err)
	}
	refused("LOG_MISSING")
	if err := os.Remove(logPath); err != nil {
		t.Fatal(err)
	}
	refused("LOG_MISSING")
	if _, err := os.Stat(logPath); err == nil {
		t.Fatal("a refused start created the log file")
	}
	fresh := serveOnce(t, bin, dir, "--init")
	if fresh == first {
		t.Fatalf("--init kept the old log id %s", first)
	}
	refused("LOG_EXISTS", "--init")
	if again := serveOnce(t, bin, dir); again != fresh {
		t.Fatalf("start after --init opened %s, want %s", again, fresh)
	}
}
