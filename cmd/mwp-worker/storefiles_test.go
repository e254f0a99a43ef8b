package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
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

// writeStores writes an authority log with two Groups' events (in-process,
// as `authority serve` would) into dir/auth and a worker store holding
// those events into dir/worker. It returns the stored events of grp-a.
func writeStores(t *testing.T, dir string) [][]byte {
	t.Helper()
	auth := filepath.Join(dir, "auth")
	svc, err := authoritylite.Open(authoritylite.Config{Dir: auth})
	if err != nil {
		t.Fatal(err)
	}
	hk := writeKey(t, t.TempDir(), "alice", protocol.ActorHuman, "alice")
	if err := svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	for _, g := range []string{"grp-a", "grp-b"} {
		if _, err := alice.Do(context.Background(), protocol.CmdMissionCreate, g,
			&protocol.CreateMissionPayload{MissionID: "mis-" + g, Title: g, Objective: "check", PriorityClass: protocol.PriorityNormal}); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	ws, err := queue.Open(filepath.Join(dir, "worker"), queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	var grpA [][]byte
	var batch []queue.Incoming
	if err := authoritylite.ReadLog(filepath.Join(auth, "authority.db"), time.Second, func(g string, raw []byte) error {
		if g == "grp-a" {
			grpA = append(grpA, append([]byte(nil), raw...))
		}
		in, err := queue.Decode(raw)
		if err == nil {
			batch = append(batch, in)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Apply(batch); err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	if len(grpA) == 0 {
		t.Fatal("no grp-a events")
	}
	return grpA
}

// flipInFile changes one digit inside raw where it is stored in path.
func flipInFile(t *testing.T, path string, raw []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy: a freed page may still hold a stale one, ahead of the
	// live one in the file.
	j, n := bytes.Index(raw, []byte(`"occurredAt":"20`)), 0
	for off := 0; j >= 0; n++ {
		i := bytes.Index(data[off:], raw)
		if i < 0 {
			break
		}
		at := off + i + j + len(`"occurredAt":"20`)
		data[at] = '0' + (data[at]-'0'+1)%10
		off += i + len(raw)
	}
	if n == 0 {
		t.Fatal("event not found in the file")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"authority.key", "key.pem"} {
		if p := filepath.Join(dst, f); fileExists(p) {
			os.Chmod(p, 0o600)
		}
	}
	return dst
}

// TestMultiProcessCheckExitCodes runs `authority check` and `check` as
// processes on sound and damaged stores: exit 0 and "ok" when sound, 1
// and a DAMAGE line naming the Group and sequence when damaged, 2 when the
// check cannot run; and `authority serve` on a damaged log starts (the
// Group is not served) or refuses with one coded line, never a panic.
func TestMultiProcessCheckExitCodes(t *testing.T) {
	bin := buildBinary(t)
	base := t.TempDir()
	grpA := writeStores(t, base)
	auth, worker := filepath.Join(base, "auth"), filepath.Join(base, "worker")
	pub := filepath.Join(auth, "authority.pub")

	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		code, out, stderr := runBin(t, bin, args...)
		if code != wantCode || !strings.Contains(out+stderr, want) {
			t.Fatalf("%v: exit %d (want %d), want %q in\nstdout %s\nstderr %s", args, code, wantCode, want, out, stderr)
		}
		return out
	}
	expect(0, "ok: no damage found", "authority", "check", "--data", auth)
	var rep storecheck.Report
	if err := json.Unmarshal([]byte(expect(0, `"ok": true`, "authority", "check", "--data", auth, "--json")), &rep); err != nil || len(rep.Groups) != 2 || !rep.SignaturesChecked {
		t.Fatalf("authority check --json: %+v %v", rep, err)
	}
	expect(0, "ok: no damage found", "check", "--data", worker, "--authority-key", pub)
	expect(0, "signatures not checked", "check", "--data", worker)
	expect(2, "authority check:", "authority", "check", "--data", t.TempDir())
	expect(2, "check:", "check", "--data", t.TempDir())

	// A flipped byte in a stored event: both checks name it.
	last := uint64(len(grpA))
	badAuth, badWorker := copyDir(t, auth), copyDir(t, worker)
	flipInFile(t, filepath.Join(badAuth, "authority.db"), grpA[last-1])
	flipInFile(t, filepath.Join(badWorker, "worker.db"), grpA[last-1])
	line := fmt.Sprintf("DAMAGE group grp-a sequence %d: AUTH_INVALID_SIGNATURE", last)
	expect(1, line, "authority", "check", "--data", badAuth)
	expect(1, line, "check", "--data", badWorker, "--authority-key", pub)
	if err := json.Unmarshal([]byte(expect(1, `"ok": false`, "check", "--data", badWorker, "--authority-key", pub, "--json")), &rep); err != nil || rep.OK || rep.Problems[0].GroupID != "grp-a" {
		t.Fatalf("check --json on a damaged store: %+v %v", rep, err)
	}
	// The damaged authority serves, but not grp-a: it starts.
	p := startProc(t, bin, "authority", "serve", "--data", badAuth, "--listen", "127.0.0.1:0")
	p.await(t, logLineRe, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.logs(), "group not served") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.logs(), "group=grp-a") {
		t.Fatalf("the damaged Group is not reported:\n%s", p.logs())
	}
	// A running authority holds its file: check cannot run.
	expect(2, "held by a running authority", "authority", "check", "--data", badAuth)
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done

	// Truncated: serve and run refuse with one coded line; both checks say so.
	cut := copyDir(t, auth)
	if err := os.Truncate(filepath.Join(cut, "authority.db"), 3*4096); err != nil {
		t.Fatal(err)
	}
	expect(1, "DAMAGE meta: the file is truncated", "authority", "check", "--data", cut)
	code, _, stderr := runBin(t, bin, "authority", "serve", "--data", cut, "--listen", "127.0.0.1:0")
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "authority serve: INTERNAL_ERROR: STORE_DAMAGED: ") {
		t.Fatalf("serve on a truncated log: exit %d, stderr %q", code, stderr)
	}
	cutW := copyDir(t, worker)
	if err := os.Truncate(filepath.Join(cutW, "worker.db"), 3*4096); err != nil {
		t.Fatal(err)
	}
	expect(1, "DAMAGE meta: the file is truncated", "check", "--data", cutW)
	expect(1, "STORE_DAMAGED", "inspect", "--data", cutW)
}
