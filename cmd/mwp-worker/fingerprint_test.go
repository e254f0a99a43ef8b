package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A wrong --authority-fingerprint is fatal at once: `run` exits 1 with a
// last line naming the pin and the certificate the authority presented,
// instead of retrying forever.
func TestRunWrongFingerprintExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	writeKey(t, filepath.Join(dir, "keys"), "w1", protocol.ActorAgent, "w1")
	auth := startProc(t, bin, "authority", "serve", "--data", filepath.Join(dir, "authority"), "--listen", "127.0.0.1:0")
	url := auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	real := auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]
	wrong := "sha256:" + strings.Repeat("0", 64)
	w := startProc(t, bin, "run", "--data", filepath.Join(dir, "worker"), "--key", filepath.Join(dir, "keys", "w1.key"),
		"--authority", url, "--authority-fingerprint", wrong, "--group", "grp-a")
	select {
	case err := <-w.done:
		w.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1\n%s", err, w.logs())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("run kept going with a wrong fingerprint\n%s", w.logs())
	}
	lines := strings.Split(strings.TrimSpace(w.logs()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "run: ") || !strings.Contains(last, wrong) || !strings.Contains(last, real) {
		t.Fatalf("last line %q, want one naming the pin %s and the certificate %s", last, wrong, real)
	}
}
