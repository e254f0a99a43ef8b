package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// An authority restored from a real backup of its data directory behind a
// running worker, as separate processes over loopback. The backup is taken
// after wi-1; wi-2 and wi-3 run after it and are lost with the restore. The
// worker must report the divergence within one connection to the restored
// authority (the log line, status, the metric, /readyz), apply and run
// nothing of the restored log's new work, and after `resync` run that work.
// Two ways to meet the restored authority: the worker reconnects by itself
// (the restored log ends before its cursor: the authority refuses its
// position), or it was down while the restored authority issued new events
// past its cursor (the overlap it asks for again differs from its store).
func TestMultiProcessRestoredAuthority(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, c := range []struct {
		name       string
		workerDown bool
	}{
		{"the worker reconnects to the restored authority", false},
		{"the worker starts after the restored log passed its cursor", true},
	} {
		t.Run(c.name, func(t *testing.T) { restoredAuthority(t, bin, c.workerDown) })
	}
}

func restoredAuthority(t *testing.T, bin string, workerDown bool) {
	k := newClusterOf(t, bin, "--slots", "1", "--demo-step", "20ms")
	url := k.auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), time.Second)[1]
	fp := k.auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), time.Second)[1]
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	run := func(id string) {
		k.offer(id)
		k.co.waitState(id, protocol.WorkSubmitted)
		k.co.do(k.coordActor, k.ck, protocol.CmdWorkAcceptResult, k.coordEnv, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
		k.co.waitState(id, protocol.WorkVerified)
	}

	run("wi-1")
	k.caughtUp(t)
	backup := filepath.Join(t.TempDir(), "backup")
	k.stop()
	if out, err := exec.Command("cp", "-a", k.authDir, backup).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	k.restartAuthority(t, port)
	k.freshCoordinator(t, url, fp)
	run("wi-2")
	run("wi-3")
	cursor := k.caughtUp(t)
	connections := metricValue(t, k.workerOps, "mwp_worker_connections_total")
	runs := metricValue(t, k.workerOps, "mwp_worker_runs_started_total")
	if runs != 3 {
		t.Fatalf("runs started before the restore: %v, want 3", runs)
	}
	t.Logf("worker at %d; restoring the authority's copy", cursor)
	// A reader over the routes (as `coordinator run` and `mission status
	// --watch` are) that followed the old history to the same cursor.
	apub, err := protocol.LoadPublicKey(filepath.Join(k.authDir, "authority.pub"))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := remote.Dial(context.Background(), remote.Config{URL: url, Trust: remote.Trust{Pin: fp},
		Actor: protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, Key: k.co.human, AuthorityKeys: protocol.NewKeySet(apub)})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := reader.Events(context.Background(), "grp-a", 0, 0); err != nil || len(evs) == 0 || evs[len(evs)-1].Sequence != cursor {
		t.Fatalf("the reader before the restore: %d events, %v", len(evs), err)
	}

	if workerDown {
		k.stopWorker(t)
	}
	k.stop()
	if err := os.RemoveAll(k.authDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, k.authDir).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	k.restartAuthority(t, port)
	k.freshCoordinator(t, url, fp)
	head := metricValue(t, k.authOps, `mwp_authority_group_head{group="grp-a"}`)
	if head >= float64(cursor) {
		t.Fatalf("the restored log ends at %v, not before the worker's cursor %d", head, cursor)
	}
	var fresh []string // the restored authority's new work
	offer := func() {
		id := fmt.Sprintf("wi-new-%d", len(fresh)+1)
		k.offer(id)
		k.co.waitState(id, protocol.WorkOffered)
		fresh = append(fresh, id)
	}
	if workerDown {
		// The restored log grows past the worker's cursor before it starts.
		for metricValue(t, k.authOps, `mwp_authority_group_head{group="grp-a"}`) <= float64(cursor) {
			offer()
		}
		k.worker = startProc(t, k.bin, k.workerArgs...)
		k.workerOps = k.worker.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`), 10*time.Second)[1]
		connections, runs = 0, 0
	}

	// Reported within one connection to the restored authority.
	waitMetricFor(t, k.workerOps, `mwp_worker_group_diverged{group="grp-a"}`, 1, time.Minute)
	// The engine counts a connection when it handles the client's Connected
	// notice, which may come after the divergence the SUBSCRIBE found.
	if got := waitMetricAtLeast(t, k.workerOps, "mwp_worker_connections_total", connections+1, 10*time.Second); got != connections+1 {
		t.Fatalf("divergence reported after %v connections to the restored authority, want 1", got-connections)
	}
	k.worker.awaitErr(t, "group diverged: ", 5*time.Second)
	if code, body := httpGet(t, k.workerOps+"/readyz"); code != 503 || !strings.Contains(body, "group grp-a diverged at sequence") {
		t.Fatalf("worker /readyz with a diverged Group: %d %q", code, body)
	}
	out, err := exec.Command(k.bin, "status", "--data", k.workerDir, "--json").CombinedOutput()
	var st struct{ Worker statusView }
	if err != nil || json.Unmarshal(out, &st) != nil || len(st.Worker.Groups) != 1 || st.Worker.Groups[0].Diverged == nil {
		t.Fatalf("status --json does not show the divergence: %v\n%s", err, out)
	}
	d := st.Worker.Groups[0].Diverged
	if workerDown != (d.AuthorityLastSequence == nil) {
		t.Fatalf("divergence %+v: found the wrong way (the worker was down: %v)", d, workerDown)
	}
	if out, err := exec.Command(k.bin, "status", "--data", k.workerDir).CombinedOutput(); err != nil || !strings.Contains(string(out), "DIVERGED at sequence") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// The reader is told the same way, on its next read and every later one.
	wantReason := "ahead_of_log"
	if workerDown {
		wantReason = remote.ReasonDiverged
	}
	for range 2 {
		_, err := reader.Events(context.Background(), "grp-a", cursor, 0)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeProtocolViolation || pe.Details["reason"] != wantReason {
			t.Fatalf("the reader after the restore: %v, want PROTOCOL_VIOLATION %s", err, wantReason)
		}
	}
	if !workerDown {
		for range 3 {
			offer()
		}
	}

	// Nothing of the restored log's new work reached the worker.
	if v := metricValue(t, k.workerOps, "mwp_worker_runs_started_total"); v != runs {
		t.Fatalf("runs started after the restore: %v, want %v", v-runs, 0)
	}
	k.stopWorker(t)
	out, err = exec.Command(k.bin, "check", "--data", k.workerDir).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "group grp-a:") || !strings.Contains(string(out), "DIVERGED at sequence") {
		t.Fatalf("check of the diverged store: exit %d\n%s", code, out)
	}
	out, err = exec.Command(k.bin, "inspect", "--data", k.workerDir, "--json").CombinedOutput()
	var rep queue.Report
	if err != nil || json.Unmarshal(out, &rep) != nil || len(rep.Groups) != 1 {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	g := rep.Groups[0]
	if g.Divergence == nil || g.Cursor != cursor || slices.ContainsFunc(g.Items, func(it queue.ItemReport) bool { return strings.HasPrefix(it.WorkItemID, "wi-new-") }) {
		t.Fatalf("the worker's store after the divergence: cursor %d (was %d), divergence %+v, items %+v", g.Cursor, cursor, g.Divergence, g.Items)
	}
	for _, id := range fresh {
		if e, _ := k.co.store.Item("grp-a", id); e.State != protocol.WorkOffered || e.Owner != "" {
			t.Fatalf("%s of the restored log was taken before resync: %s by %q", id, e.State, e.Owner)
		}
	}

	// resync, and the new work runs.
	out, err = exec.Command(k.bin, "resync", "--data", k.workerDir, "--group", "grp-a").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("group grp-a reset: cursor was %d", cursor)) {
		t.Fatalf("resync: %v\n%s", err, out)
	}
	k.worker = startProc(t, k.bin, k.workerArgs...)
	k.workerOps = k.worker.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`), 10*time.Second)[1]
	for _, id := range fresh {
		k.co.waitState(id, protocol.WorkSubmitted)
		k.co.do(k.coordActor, k.ck, protocol.CmdWorkAcceptResult, k.coordEnv, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1})
		k.co.waitState(id, protocol.WorkVerified)
	}
	if v := metricValue(t, k.workerOps, "mwp_worker_runs_started_total"); v != float64(len(fresh)) {
		t.Fatalf("runs started after resync: %v, want %d", v, len(fresh))
	}
	k.caughtUp(t)
	if v := metricValue(t, k.workerOps, `mwp_worker_group_diverged{group="grp-a"}`); v != 0 {
		t.Fatalf("still diverged after resync: %v", v)
	}
	t.Logf("restored at %v behind a worker at %d: diverged (%s), %d new items run after resync", head, cursor, d.Describe(), len(fresh))
	k.stopWorker(t)
	k.stop()
}

// caughtUp waits until the worker's cursor of grp-a is the authority's
// head, and returns it.
func (k *cluster) caughtUp(t *testing.T) uint64 {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		head := metricValue(t, k.authOps, `mwp_authority_group_head{group="grp-a"}`)
		cursor := metricValue(t, k.workerOps, `mwp_worker_group_cursor{group="grp-a"}`)
		if head > 0 && cursor == head {
			return uint64(cursor)
		}
		if time.Now().After(deadline) {
			t.Fatalf("grp-a: authority head %v, worker cursor %v", head, cursor)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restartAuthority starts `authority serve` again on its data directory
// and port (the worker's --authority URL).
func (k *cluster) restartAuthority(t *testing.T, port string) {
	t.Helper()
	args := slices.Clone(k.auth.cmd.Args[1:])
	if i := slices.Index(args, "--listen"); i >= 0 {
		args[i+1] = "127.0.0.1:" + port
	}
	k.auth = startProc(t, k.bin, args...)
	k.authOps = k.auth.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`), 10*time.Second)[1]
	k.auth.await(t, regexp.MustCompile(`listening on wss://`), 10*time.Second)
}

// freshCoordinator connects the coordinator again with a new, empty store
// (its old store followed the authority's old history too) and follows
// grp-a from the start.
func (k *cluster) freshCoordinator(t *testing.T, url, fp string) {
	t.Helper()
	apub, err := protocol.LoadPublicKey(filepath.Join(k.authDir, "authority.pub"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := queue.Open(t.TempDir(), queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	human := k.co.human
	cfg := client.Config{URL: url, Trust: client.Trust{Pin: fp}, AgentID: "coord", Key: k.ck, Store: store, AuthorityKeys: protocol.NewKeySet(apub)}
	k.co = connectCoordinator(t, cfg, 1)
	t.Cleanup(k.co.stopOnce)
	k.co.key, k.co.human, k.co.logs = k.ck, human, k.worker.logs
	k.co.c.AddGroup("grp-a")
}

// stopWorker stops `run` with SIGINT and waits for its exit.
func (k *cluster) stopWorker(t *testing.T) {
	t.Helper()
	if err := k.worker.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := k.waitExit(k.worker, 15*time.Second); code != 0 {
		t.Fatalf("worker exit %d:\n%s", code, k.worker.logs())
	}
}

func waitMetricFor(t *testing.T, base, sample string, want float64, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		if v := metricValue(t, base, sample); v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", sample, metricValue(t, base, sample), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitMetricAtLeast waits until sample is at least min, and returns it.
func waitMetricAtLeast(t *testing.T, base, sample string, min float64, within time.Duration) float64 {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		if v := metricValue(t, base, sample); v >= min {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want at least %v", sample, metricValue(t, base, sample), min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitCode is a finished command's exit status (0 when err is nil, -1
// when it did not run).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
