package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Separate processes: a running `authority serve` with closed registration
// learns a new agent from `authority enroll` (the policy service's
// registration of the worker's enrollment), and that worker's `run` then
// opens its session; the authority is never restarted. Refusals first: a
// key the authority does not know, and an enrollment past its validity.
func TestMultiProcessEnrollAtRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	writeKey(t, keys, "policy", protocol.ActorService, "org-policy")
	writeKey(t, keys, "stranger", protocol.ActorService, "stranger")
	writeKey(t, keys, "w2", protocol.ActorAgent, "w2")
	authDir, workerDir := filepath.Join(dir, "authority"), filepath.Join(dir, "worker")
	auth := startProc(t, bin, "authority", "serve", "--data", authDir, "--listen", "127.0.0.1:0", "--closed-registration",
		"--policy", "org-policy="+filepath.Join(keys, "policy.pub"))
	url := auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	fp := auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]

	enrollment := func(name, valid string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		out, err := exec.Command(bin, "run", "--data", workerDir, "--key", filepath.Join(keys, "w2.key"), "--enrollment", path, "--enrollment-valid", valid).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "valid until") {
			t.Fatalf("run --enrollment: %v\n%s", err, out)
		}
		return path
	}
	enroll := func(path, key string) (string, int) {
		t.Helper()
		out, err := exec.Command(bin, "authority", "enroll", "--data", authDir, "--policy-key", filepath.Join(keys, key), path).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	fresh := enrollment("w2-enroll.json", "1h")
	if out, code := enroll(fresh, "stranger.key"); code != 1 || !strings.HasPrefix(out, "authority enroll: AUTH_INVALID_SIGNATURE") || strings.Count(out, "\n") != 1 {
		t.Fatalf("enroll signed by an unregistered service: exit %d\n%s", code, out)
	}
	expired := enrollment("w2-expired.json", "1ms")
	for until := time.Now().Add(time.Second); time.Now().Before(until); {
		time.Sleep(10 * time.Millisecond) // validUntil is 1 ms after issuedAt (ms precision)
	}
	if out, code := enroll(expired, "policy.key"); code != 1 || !strings.HasPrefix(out, "authority enroll: AUTH_INVALID_SIGNATURE") || !strings.Contains(out, "enrollment expired") {
		t.Fatalf("enroll of an expired enrollment: exit %d\n%s", code, out)
	}
	out, code := enroll(fresh, "policy.key")
	if code != 0 || !regexp.MustCompile(`^enrolled agent w2 card sha256:[0-9a-f]{64}\n$`).MatchString(out) {
		t.Fatalf("enroll: exit %d\n%s", code, out)
	}

	worker := startProc(t, bin, "run", "--data", workerDir, "--key", filepath.Join(keys, "w2.key"), "--authority", url,
		"--authority-fingerprint", fp, "--authority-key", filepath.Join(authDir, "authority.pub"))
	worker.await(t, regexp.MustCompile(`agent w2 session 1 open`), 15*time.Second)
	if auth.cmd.ProcessState != nil {
		t.Fatalf("the authority exited:\n%s", auth.logs())
	}
}
