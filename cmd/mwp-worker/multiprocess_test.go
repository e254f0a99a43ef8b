package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// proc is a child process whose stdout is collected line by line.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	errb strings.Builder
	done chan error
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	collect := func(r io.Reader, b *strings.Builder) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			b.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}
	wg.Add(2)
	go collect(stdout, &p.out)
	go collect(stderr, &p.errb)
	go func() {
		wg.Wait()
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	})
	return p
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String() + p.errb.String()
}

// await returns the first submatch of re in stdout, waiting up to d.
func (p *proc) await(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.stdout()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in time; output:\n%s", re, p.logs())
	return nil
}

// awaitErr waits up to d for text in the process's output, stderr included.
func (p *proc) awaitErr(t *testing.T, text string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.logs(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in time; output:\n%s", text, p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// buildBinary builds mwp-worker with the build tags given (powerloss: the
// failpoint of the power-loss suite).
func buildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go toolchain to build the binary")
		}
	}
	bin := filepath.Join(t.TempDir(), "mwp-worker")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command(goBin, append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeKey(t *testing.T, dir, name string, kind protocol.ActorKind, id string) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := protocol.WriteKeyFiles(dir, name, k); err != nil {
		t.Fatal(err)
	}
	return k
}

// coordinatorEnrollment writes the coordinator agent's signed
// agent_card_register to dir/coord-enroll.json, for `authority serve
// --enroll`, and returns its path and the card.
func coordinatorEnrollment(t *testing.T, dir string, ck protocol.PrivateKey) (string, protocol.AgentCard) {
	t.Helper()
	card, err := protocol.SignedCard(protocol.AgentCard{AgentID: "coord", AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "coord",
		Keys: protocol.List[protocol.PublicKey]{ck.Public().Encode()}, Capabilities: protocol.List[protocol.Capability]{{ID: "coordination", Version: "1.0.0"}},
		Roles: protocol.List[protocol.Role]{protocol.RoleCoordinator}, MaxConcurrency: 1, IssuedAt: protocol.NewTime(time.Now())}, ck)
	if err != nil {
		t.Fatal(err)
	}
	coordActor := protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}
	_, raw, err := protocol.BuildCommand(coordActor, ck, protocol.CmdAgentCardRegister, protocol.Envelope{}, &protocol.RegisterAgentCardPayload{AgentCard: card}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "coord-enroll.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, card
}

// openCoordinator connects under session epoch 0, opens session 1 and
// reconnects under it.
func openCoordinator(t *testing.T, cfg client.Config, card protocol.AgentCard) *coordinator {
	t.Helper()
	co := connectCoordinator(t, cfg, 0)
	rec, _ := protocol.Marshal(card)
	co.do(protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, cfg.Key, protocol.CmdSessionOpen, protocol.Envelope{},
		&protocol.OpenSessionPayload{AgentID: "coord", SessionEpoch: 1, AgentCardHash: protocol.Digest(rec)})
	co.stop()
	return connectCoordinator(t, cfg, 1)
}

// coordinator is the test's coordinator agent: a client.Client of its
// own over wss, relaying the human owner's signed commands too.
type coordinator struct {
	t      *testing.T
	c      *client.Client
	store  *queue.Store
	key    protocol.PrivateKey
	human  protocol.PrivateKey
	cancel context.CancelFunc
	done   chan error
	logs   func() string // the worker's, for failures
	once   sync.Once
}

func connectCoordinator(t *testing.T, cfg client.Config, epoch uint64) *coordinator {
	t.Helper()
	cfg.SessionEpoch = epoch
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	co := &coordinator{t: t, c: c, store: cfg.Store.(*queue.Store), key: cfg.Key, cancel: cancel, done: make(chan error, 1)}
	go func() { co.done <- c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.State() != client.StateConnected {
		if time.Now().After(deadline) {
			t.Fatalf("coordinator not connected: %v", c.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return co
}

func (co *coordinator) stop() {
	co.cancel()
	<-co.done
}

// stopOnce stops the coordinator if it still runs.
func (co *coordinator) stopOnce() {
	co.once.Do(co.stop)
}

// do sends one command as actor, signed by key, with the given epochs.
func (co *coordinator) do(actor protocol.Actor, key protocol.PrivateKey, typ protocol.CommandType, env protocol.Envelope, payload any) {
	co.t.Helper()
	_, raw, err := protocol.BuildCommand(actor, key, typ, env, payload, time.Now())
	if err != nil {
		co.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := co.c.Send(ctx, raw); err != nil {
		co.t.Fatalf("%s by %s: %v", typ, actor.ID, err)
	}
}

func (co *coordinator) waitState(id string, want protocol.WorkItemState) queue.Entry {
	co.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if e, ok := co.store.Item("grp-a", id); ok && e.State == want {
			return e
		}
		time.Sleep(20 * time.Millisecond)
	}
	e, _ := co.store.Item("grp-a", id)
	logs := ""
	if co.logs != nil {
		logs = co.logs()
	}
	co.t.Fatalf("%s is %s, want %s\nworker:\n%s", id, e.State, want, logs)
	return e
}

func demoContract(id string, now time.Time) protocol.WorkContract {
	cpu := 1.0
	return protocol.WorkContract{
		ContractID: "wc-" + id, Revision: 1, Goal: "demo " + id,
		RequiredOutputs: protocol.List[protocol.OutputSpec]{{Name: "note", MediaType: "text/plain"}},
		AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
			{ID: "ac-1", Description: "note written", EvidenceRequired: protocol.List[string]{"note"}}},
		Inputs: protocol.List[protocol.InputRef]{}, Dependencies: protocol.List[protocol.Dependency]{},
		AllowedTools: protocol.List[string]{}, AllowedData: protocol.List[string]{}, AllowedOperations: protocol.List[string]{"read"},
		ResourceLimits:       protocol.ResourceLimits{CPU: &cpu, MemoryMiB: protocol.Uint64(64)},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "demo.steps", Version: "1.x"}},
		Deadline:             protocol.NewTime(now.Add(time.Hour)), Urgency: protocol.UrgencyNormal, BusinessImpact: protocol.ImpactMedium,
		Budgets: protocol.Budgets{WallClockSeconds: protocol.Float64(3600)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 1, Backoff: protocol.Backoff{InitialMs: 100, MaxMs: 1000, Multiplier: 2},
			AttemptTimeoutMs: 600000, CostLimit: 1},
		Risk: protocol.Risk{Class: protocol.RiskLow},
	}
}

// cluster is `authority serve` and `run` as separate processes, with the
// test as the coordinator agent (and the human owner, alice) of Mission
// mis-a in grp-a, of which the worker w1 is a member.
type cluster struct {
	t                  *testing.T
	t0                 time.Time
	bin                string
	auth, worker       *proc
	authOps, workerOps string // http://ADDR of --metrics-listen
	workerDir, authDir string
	workerArgs         []string // the worker's command line, to start it again
	authArgs           []string // the authority's command line (--listen 127.0.0.1:0)
	co                 *coordinator
	coordActor         protocol.Actor
	coordEnv           protocol.Envelope
	ck                 protocol.PrivateKey
}

// newCluster starts both processes, the worker with workerArgs added to
// its flags; before the worker is a member, its /readyz must say not ready.
func newCluster(t *testing.T, workerArgs ...string) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t0 := time.Now()
	bin := buildBinary(t)
	t.Logf("built after %v", time.Since(t0))
	return newClusterOf(t, bin, workerArgs...)
}

// newClusterOf is newCluster with the binary given.
func newClusterOf(t *testing.T, bin string, workerArgs ...string) *cluster {
	t.Helper()
	k := &cluster{t: t, t0: time.Now(), bin: bin, coordActor: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}}
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	hk := writeKey(t, keys, "alice", protocol.ActorHuman, "alice")
	k.ck = writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	writeKey(t, keys, "w1", protocol.ActorAgent, "w1")
	d1, d2 := filepath.Join(dir, "authority"), filepath.Join(dir, "worker")
	k.workerDir, k.authDir = d2, d1

	// Enrollments: the worker writes its own; the coordinator's is built here.
	wEnroll := filepath.Join(dir, "w1-enroll.json")
	if out, err := exec.Command(k.bin, "run", "--data", d2, "--key", filepath.Join(keys, "w1.key"), "--enrollment", wEnroll).CombinedOutput(); err != nil {
		t.Fatalf("enrollment: %v\n%s", err, out)
	}
	cEnroll, card := coordinatorEnrollment(t, dir, k.ck)

	k.authArgs = []string{"authority", "serve", "--data", d1, "--listen", "127.0.0.1:0",
		"--human", "alice=" + filepath.Join(keys, "alice.pub"), "--enroll", wEnroll, "--enroll", cEnroll, "--metrics-listen", "127.0.0.1:0"}
	k.auth = startProc(t, k.bin, k.authArgs...)
	metricsLine := regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`)
	k.authOps = k.auth.await(t, metricsLine, 10*time.Second)[1]
	url := k.auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	fp := k.auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]
	authPub := filepath.Join(d1, "authority.pub")

	args := append([]string{"run", "--data", d2, "--key", filepath.Join(keys, "w1.key"), "--authority", url,
		"--authority-fingerprint", fp, "--authority-key", authPub, "--group", "grp-a", "--metrics-listen", "127.0.0.1:0"}, workerArgs...)
	k.workerArgs = args
	k.worker = startProc(t, k.bin, args...)
	t.Logf("authority up after %v", time.Since(k.t0))
	k.workerOps = k.worker.await(t, metricsLine, 10*time.Second)[1]
	k.worker.await(t, regexp.MustCompile(`agent w1 session 1 open`), 15*time.Second)
	t.Logf("worker session after %v", time.Since(k.t0))
	// Session open and connected, but not yet a member of grp-a: not
	// ready, and it says why (connecting first, then the Group).
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body := httpGet(t, k.workerOps+"/readyz")
		if code != 503 {
			t.Fatalf("worker /readyz before its Group: %d %q", code, body)
		}
		if strings.Contains(body, "grp-a") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker /readyz never names its missing Group: %q", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := httpGet(t, k.authOps+"/readyz"); code != 200 {
		t.Fatalf("authority /readyz: %d", code)
	}

	// The coordinator: HELLO under epoch 0, open session 1, reconnect.
	apub, err := protocol.LoadPublicKey(authPub)
	if err != nil {
		t.Fatal(err)
	}
	store, err := queue.Open(filepath.Join(dir, "coord"), queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ccfg := client.Config{URL: url, Trust: client.Trust{Pin: fp}, AgentID: "coord", Key: k.ck, Store: store, AuthorityKeys: protocol.NewKeySet(apub)}
	k.co = openCoordinator(t, ccfg, card)
	t.Cleanup(k.co.stopOnce)
	k.co.key, k.co.human, k.co.logs = k.ck, hk, k.worker.logs

	t.Logf("coordinator session after %v", time.Since(k.t0))
	alice := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	one := protocol.Uint64(1)
	k.co.do(alice, hk, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp-a"}, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "demo", Objective: "two processes", PriorityClass: protocol.PriorityNormal})
	k.co.do(alice, hk, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: "grp-a", MembershipEpoch: one},
		&protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})
	k.coordEnv = protocol.Envelope{GroupID: "grp-a", SessionEpoch: one, MembershipEpoch: one, CoordinatorEpoch: one}
	k.co.do(k.coordActor, k.ck, protocol.CmdMembershipChange, k.coordEnv, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	k.co.c.AddGroup("grp-a")
	return k
}

// offer authorizes WorkItem id and offers it to w1.
func (k *cluster) offer(id string) {
	now := time.Now()
	c := demoContract(id, now)
	k.co.do(k.coordActor, k.ck, protocol.CmdWorkAuthorize, k.coordEnv, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
	k.co.do(k.coordActor, k.ck, protocol.CmdWorkOffer, k.coordEnv, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "demo.steps", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"test"}}}},
		ExpiresAt: protocol.NewTime(now.Add(10 * time.Minute))})
}

// waitExit waits for p to exit and returns its status (-1: killed by a signal).
func (k *cluster) waitExit(p *proc, within time.Duration) int {
	k.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			k.t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(within):
		k.t.Fatalf("process did not exit within %v:\n%s", within, p.logs())
		return 0
	}
}

// stop ends the coordinator and the authority.
func (k *cluster) stop() {
	k.co.stopOnce()
	_ = k.auth.cmd.Process.Signal(syscall.SIGINT)
	k.waitExit(k.auth, 10*time.Second)
	k.t.Logf("authority stopped after %v", time.Since(k.t0))
}

// Separate processes: `authority serve` and `run`, a coordinator and a
// human driving a Mission over wss from the test, the worker's result
// submitted and accepted; then SIGINT stops the worker cleanly, sending
// the checkpoint of the item it was running.
func TestMultiProcessAuthorityAndWorker(t *testing.T) {
	k := newCluster(t, "--slots", "1", "--demo-step", "300ms")
	co, worker := k.co, k.worker
	start := time.Now()
	k.offer("wi-1")
	e := co.waitState("wi-1", protocol.WorkSubmitted)
	co.do(k.coordActor, k.ck, protocol.CmdWorkAcceptResult, k.coordEnv, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})
	co.waitState("wi-1", protocol.WorkVerified)
	if e.Owner != "w1" {
		t.Fatalf("wi-1 owner %q", e.Owner)
	}

	t.Logf("wi-1 verified after %v", time.Since(start))
	waitMetric(t, k.workerOps, `mwp_worker_queue_items{group="grp-a",state="verified"}`, 1)
	if v := metricValue(t, k.workerOps, `mwp_worker_commands_total{result="accepted",type="work.submit"}`); v != 1 {
		t.Fatalf("work.submit accepted: %v, want 1", v)
	}
	if v := metricValue(t, k.workerOps, `mwp_worker_runs_started_total`); v != 1 {
		t.Fatalf("runs started: %v, want 1", v)
	}
	if v := metricValue(t, k.authOps, `mwp_authority_commands_total{result="accepted",type="work.accept_result"}`); v != 1 {
		t.Fatalf("authority work.accept_result accepted: %v, want 1", v)
	}
	// The handler's output went up the artifact route and was published:
	// the bytes are in the authority's store under the manifest's digest.
	if v := metricValue(t, k.authOps, `mwp_authority_commands_total{result="accepted",type="artifact.publish"}`); v != 1 {
		t.Fatalf("authority artifact.publish accepted: %v, want 1:\n%s", v, worker.logs())
	}
	if m, _ := filepath.Glob(filepath.Join(k.authDir, "artifacts", "??", "*")); len(m) != 1 {
		t.Fatalf("the authority's artifact store holds %v, want the one output", m)
	}
	if code, body := httpGet(t, k.workerOps+"/readyz"); code != 200 {
		t.Fatalf("worker /readyz after work: %d %q", code, body)
	}
	if v := metricValue(t, k.authOps, `mwp_authority_connections{state="admitted"}`); v < 2 {
		t.Fatalf("authority connections admitted: %v, want the worker's and the coordinator's", v)
	}
	if v := metricValue(t, k.authOps, `mwp_authority_connections{state="in_session"}`); v < 2 {
		t.Fatalf("authority connections in session: %v, want the worker's and the coordinator's", v)
	}
	// Lag is the authority's head minus the worker's cursor: caught up, 0.
	for deadline := time.Now().Add(10 * time.Second); ; {
		head := metricValue(t, k.authOps, `mwp_authority_group_head{group="grp-a"}`)
		cursor := metricValue(t, k.workerOps, `mwp_worker_group_cursor{group="grp-a"}`)
		if head >= 5 && cursor == head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grp-a: authority head %v, worker cursor %v; want the worker caught up with wi-1's events", head, cursor)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A second item is running when the worker is interrupted.
	k.offer("wi-2")
	co.waitState("wi-2", protocol.WorkActive)
	waitMetric(t, k.workerOps, `mwp_worker_group_busy_slots{group="grp-a"}`, 1)
	// `status` shows the run, its lease and the connection.
	out, err := exec.Command(k.bin, "status", "--data", k.workerDir, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st struct {
		PID    int
		Worker statusView
	}
	if err := json.Unmarshal(out, &st); err != nil || st.PID != worker.cmd.Process.Pid || st.Worker.Connection != "connected" ||
		len(st.Worker.Running) != 1 || st.Worker.Running[0].WorkItemID != "wi-2" || st.Worker.Running[0].LeaseID == "" {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if out, err := exec.Command(k.bin, "status", "--data", k.workerDir).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "worker w1, pid") || !strings.Contains(string(out), "slot 0: grp-a/wi-2 attempt 1, lease "+st.Worker.Running[0].LeaseID) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if err := worker.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := k.waitExit(worker, 15*time.Second); code != 0 {
		t.Fatalf("worker exit %d:\n%s", code, worker.logs())
	}
	if e, _ := co.store.Item("grp-a", "wi-2"); e.State == protocol.WorkFailed {
		t.Fatalf("wi-2 failed on SIGINT:\n%s", worker.logs())
	}
	e = co.waitState("wi-2", protocol.WorkQueued)
	if e.Checkpoint == nil || e.Owner != "w1" {
		t.Fatalf("wi-2 after SIGINT: checkpoint %v owner %q", e.Checkpoint, e.Owner)
	}
	t.Logf("wi-2 checkpointed after %v", time.Since(start))
	if !strings.Contains(worker.stdout(), "stopped:") {
		t.Fatalf("no stop report:\n%s", worker.logs())
	}
	if out, err := exec.Command(k.bin, "status", "--data", k.workerDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "no running worker") {
		t.Fatalf("status of a stopped worker: %v %s", err, out)
	}
	// The running authority, inspected: its Group and both agents' sessions.
	out, err = exec.Command(k.bin, "authority", "inspect", "--data", k.authDir, "--json").CombinedOutput()
	var ast authoritylite.Status
	if err != nil || json.Unmarshal(out, &ast) != nil || len(ast.Groups) != 1 || ast.Groups[0].MissionID != "mis-a" ||
		ast.Groups[0].Items[protocol.WorkVerified] != 1 || len(ast.Agents) != 2 || ast.Agents[1].AgentID != "w1" || ast.Agents[1].SessionEpoch != 1 || !ast.Writable {
		t.Fatalf("authority inspect --json: %v\n%s", err, out)
	}
	if out, err := exec.Command(k.bin, "authority", "inspect", "--data", k.authDir).CombinedOutput(); err != nil || !strings.Contains(string(out), "group grp-a: mission mis-a active") {
		t.Fatalf("authority inspect: %v\n%s", err, out)
	}
	k.stop()
	if out, err := exec.Command(k.bin, "authority", "inspect", "--data", k.authDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "no running authority") {
		t.Fatalf("authority inspect of a stopped authority: %v %s", err, out)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue scrapes base/metrics and returns one sample, named as the
// text format writes it (labels sorted), or -1 when it is absent.
func metricValue(t *testing.T, base, sample string) float64 {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	name, labels, _ := strings.Cut(sample, "{")
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		var parts []string
		for _, l := range m.Label {
			parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		if strings.Join(parts, ",") != strings.TrimSuffix(labels, "}") {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	return -1
}

func waitMetric(t *testing.T, base, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := metricValue(t, base, sample)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", sample, v, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
