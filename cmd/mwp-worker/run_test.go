package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunHelpNamesEveryFlag(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range []string{"--data", "--key", "--authority", "--authority-fingerprint", "--authority-key", "--group",
		"--slots", "--handler-exec", "--enrollment", "MWP_DATA", "MWP_AUTHORITY", "demo.steps", "130"} {
		if !strings.Contains(out, f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

func TestRunFlagErrors(t *testing.T) {
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	if code, _, e := runCLI(t, "keygen", "--out", keyDir, "--name", "w1", "--key-id", "agent:w1#k1"); code != 0 {
		t.Fatal(e)
	}
	if code, _, e := runCLI(t, "keygen", "--out", keyDir, "--name", "h", "--key-id", "human:alice#k1"); code != 0 {
		t.Fatal(e)
	}
	key := filepath.Join(keyDir, "w1.key")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"not an agent key", []string{"--key", filepath.Join(keyDir, "h.key")}, "not an agent key"},
		{"bad handler spec", []string{"--key", key, "--handler-exec", "nopath"}, "want CAP=PATH"},
		{"missing handler program", []string{"--key", key, "--handler-exec", "x@1.0.0=/nonexistent/prog"}, "no such file"},
		{"bad version", []string{"--key", key, "--handler-exec", "x@v1=/bin/sh"}, "MAJOR.MINOR.PATCH"},
		{"no slots", []string{"--key", key, "--slots", "0"}, "at least 1"},
		{"missing key", []string{"--key", filepath.Join(dir, "none.key")}, "--key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append([]string{"run", "--data", filepath.Join(dir, "data")}, tc.args...)...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tc.want)
			}
		})
	}
}

// The embedded mode starts authority-lite, connects over wss with the
// pinned certificate, opens session 1, and stops cleanly on cancel; a
// second start opens session 2 on the same data.
func TestRunEmbeddedStartsAndStops(t *testing.T) {
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	if code, _, e := runCLI(t, "keygen", "--out", keyDir, "--name", "w1", "--key-id", "agent:w1#k1"); code != 0 {
		t.Fatal(e)
	}
	data := filepath.Join(dir, "data")
	for epoch := 1; epoch <= 2; epoch++ {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut lockedBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"mwp-worker", "run", "--data", data, "--key", filepath.Join(keyDir, "w1.key"), "--log-level", "warn"}, &out, &errOut)
		}()
		re := regexp.MustCompile(`agent w1 session (\d+) open`)
		deadline := time.Now().Add(15 * time.Second)
		var m []string
		for time.Now().Before(deadline) && m == nil {
			m = re.FindStringSubmatch(out.String())
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		code := <-done
		if m == nil || m[1] != itoa(epoch) || code != 0 {
			t.Fatalf("start %d: session %v, exit %d\n%s\n%s", epoch, m, code, out.String(), errOut.String())
		}
		for _, want := range []string{"embedded authority listening on wss://127.0.0.1:", "certificate fingerprint sha256:", "stopped:"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(data, "authority", "authority.db")); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A 0-byte worker.db is a damaged store, as `check` says, not a new one:
// run refuses it with one line and exit 1 and leaves the file as it was
// (bbolt would have started it afresh, forgetting every event, outbox
// command and checkpoint it held).
func TestRunRefusesEmptyStore(t *testing.T) {
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	if code, _, e := runCLI(t, "keygen", "--out", keyDir, "--name", "w1", "--key-id", "agent:w1#k1"); code != 0 {
		t.Fatal(e)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "worker.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, "check", "--data", data); code != 1 {
		t.Fatalf("check of a 0-byte store: exit %d, want 1 (damage found)", code)
	}
	code, _, stderr := runCLIWithTimeout(t, time.Minute, "run", "--data", data, "--key", filepath.Join(keyDir, "w1.key"), "--log-level", "warn")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "run: ") ||
		!strings.Contains(stderr, "STORE_DAMAGED") || !strings.Contains(stderr, db) {
		t.Fatalf("run on a 0-byte store: exit %d, stderr %q", code, stderr)
	}
	if fi, err := os.Stat(db); err != nil || fi.Size() != 0 {
		t.Fatalf("the refused store was changed: %v %v", fi, err)
	}
}
