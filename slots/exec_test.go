package slots

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// python returns the real python3 executable (not a shim that needs the
// caller's environment), or skips.
func python(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func echoHandler(t *testing.T) Exec {
	script, err := filepath.Abs("../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	return Exec{Path: python(t), Args: []string{script}, Cap: protocol.Capability{ID: "echo", Version: "1.0.0"}}
}

// execAssignment runs the example handler with its options (the
// contract's notes).
func execAssignment(lease string, opts string) Assignment {
	a := assignment("grp-a", "wi-1", lease, "echo")
	a.Contract.Notes = opts
	return a
}

// The example handler runs end to end: progress and a checkpoint per
// step, an artifact echoing its context, a result naming the artifact.
func TestExecEchoHandler(t *testing.T) {
	e := newEnv(t, 1, echoHandler(t))
	e.start(t, execAssignment("l1", `{"steps":2,"note":"hello"}`))
	o := e.host.wait(t)
	if o.Kind != Completed || len(o.Result.Artifacts) != 1 {
		t.Fatalf("outcome %v %q %v", o.Kind, o.Reason, o.Err)
	}
	var echo struct {
		Context          protocol.ContextPackage
		Options          map[string]any
		CitedEvents      any
		WorkdirIsPrivate bool
	}
	if err := json.Unmarshal(e.host.artifacts[o.Result.Artifacts[0]], &echo); err != nil {
		t.Fatal(err)
	}
	// The package of its own item, and every event it cites (1…9), read
	// a page at a time through the events request.
	if echo.Context.Scope.WorkItemID != "wi-1" || echo.Options["note"] != "hello" || echo.CitedEvents != float64(9) || !echo.WorkdirIsPrivate {
		t.Fatalf("echo %+v", echo)
	}
	log := strings.Join(e.host.callLog(), "\n")
	for _, want := range []string{"progress step-1", "checkpointed step-1", "progress step-2", "checkpointed step-2", "artifact application/json"} {
		if !strings.Contains(log, want) {
			t.Fatalf("missing %q in\n%s", want, log)
		}
	}
}

// Preemption through the adapter: the program yields at its safe point,
// and the next run resumes from that checkpoint.
func TestExecPreemptResume(t *testing.T) {
	e := newEnv(t, 1, echoHandler(t))
	cps := make(chan checkpoint.Checkpoint, 8)
	e.host.onCheckpoint = func(_ Slot, c checkpoint.Checkpoint) { cps <- c }
	slot := e.start(t, execAssignment("l1", `{"steps":3,"pauseAfter":1}`))
	<-cps
	e.pool.Preempt(slot, "l1")
	o := e.host.wait(t)
	if o.Kind != Preempted || o.Checkpoint == nil || o.Checkpoint.Phase != "step-1" {
		t.Fatalf("outcome %v %q %v", o.Kind, o.Reason, o.Err)
	}
	e.start(t, execAssignment("l2", `{"steps":3,"pauseAfter":1}`))
	if o := e.host.wait(t); o.Kind != Completed {
		t.Fatalf("resumed run: %v %q %v", o.Kind, o.Reason, o.Err)
	}
	if log := strings.Join(e.host.callLog(), "\n"); strings.Count(log, "progress step-1") != 1 || !strings.Contains(log, "progress step-3") {
		t.Fatalf("did not resume after step 1:\n%s", log)
	}
}

// toolCall through the adapter: checks, key derivation and ledger replay.
func TestExecToolCall(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		want     OutcomeKind
	}{
		{"allowed", `{"opId":"push-1","tool":"git","operation":"write"}`, Completed},
		{"tool not allowed", `{"opId":"push-1","tool":"curl","operation":"write"}`, Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, echoHandler(t))
			l := &memLedger{done: map[toolkeys.Op][]byte{}}
			e.pool.cfg.Ledger = l
			for i, lease := range []string{"l1", "l2"} { // the second run replays
				e.start(t, execAssignment(lease, `{"steps":1,"toolOp":`+tc.op+`}`))
				o := e.host.wait(t)
				if o.Kind != tc.want {
					t.Fatalf("run %d: %v %q %v", i, o.Kind, o.Reason, o.Err)
				}
				if tc.want == Failed {
					if !strings.Contains(o.Reason, "AUTH_FORBIDDEN") {
						t.Fatalf("reason %q", o.Reason)
					}
					return
				}
				var echo struct{ ToolOutputs []string }
				json.Unmarshal(e.host.artifacts[o.Result.Artifacts[0]], &echo)
				key, _ := toolkeys.Key(toolkeys.Op{MissionID: "mis-grp-a", WorkItemID: "wi-1", OwnershipEpoch: 1, OperationID: "push-1"})
				if len(echo.ToolOutputs) != 1 || echo.ToolOutputs[0] != key {
					t.Fatalf("run %d: tool outputs %v, want the key %s", i, echo.ToolOutputs, key)
				}
			}
			if l.runs != 1 {
				t.Fatalf("the operation ran %d times", l.runs)
			}
		})
	}
}

// The program sees a clean environment: its own credentials and
// directories, nothing of the worker's (not HOME, not a variable set in
// the test process).
func TestExecCleanEnv(t *testing.T) {
	t.Setenv("MWP_TEST_SECRET", "must-not-leak")
	script, _ := filepath.Abs("testdata/env-handler.py")
	h := Exec{Path: python(t), Args: []string{script}, Cap: protocol.Capability{ID: "env", Version: "1.0.0"},
		Env: map[string]string{"LANG": "C.UTF-8", "MWP_CREDENTIAL": "override attempt"}}
	e := newEnv(t, 1, h)
	a := assignment("grp-a", "wi-1", "l1", "env")
	e.start(t, a)
	o := e.host.wait(t)
	if o.Kind != Completed {
		t.Fatalf("outcome %v %q %v", o.Kind, o.Reason, o.Err)
	}
	var info struct {
		Env map[string]string
		Cwd string
	}
	for _, data := range e.host.artifacts {
		json.Unmarshal(data, &info)
	}
	env := info.Env
	if env["MWP_CREDENTIAL"] != "tok-l1" || env["MWP_LEASE_ID"] != "l1" || env["LANG"] != "C.UTF-8" || env["PATH"] != cleanPath {
		t.Fatalf("env %v", env)
	}
	if _, leaked := env["MWP_TEST_SECRET"]; leaked {
		t.Fatal("a variable of the worker leaked")
	}
	if home := os.Getenv("HOME"); home != "" && env["HOME"] == home {
		t.Fatal("the worker's HOME leaked")
	}
	if env["HOME"] != info.Cwd || env["MWP_WORKDIR"] != info.Cwd || !strings.HasPrefix(filepath.Base(info.Cwd), "slot0-") {
		t.Fatalf("cwd %q env %v", info.Cwd, env)
	}
	if exp, err := time.Parse(time.RFC3339Nano, env["MWP_CREDENTIAL_EXPIRES_AT"]); err != nil || !exp.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("credential expiry %q", env["MWP_CREDENTIAL_EXPIRES_AT"])
	}
	for k := range env {
		switch k {
		case "PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD", "SHLVL", "_":
		default:
			if !strings.HasPrefix(k, "MWP_") {
				t.Errorf("unexpected variable %s", k)
			}
		}
	}
}

// A program that ignores preempt keeps running; once its lease is lost
// and it still ignores the request, it is killed with its whole process
// group after the hard timeout.
func TestExecHardTimeoutKillsGroup(t *testing.T) {
	script, _ := filepath.Abs("testdata/env-handler.py")
	e := newEnv(t, 1, Exec{Path: python(t), Args: []string{script}, Cap: protocol.Capability{ID: "env", Version: "1.0.0"}})
	child := make(chan int, 1)
	e.host.onProgress = func(_ Slot, p protocol.Progress) {
		pid, _ := strconv.Atoi(strings.TrimPrefix(p.Phase, "child-"))
		child <- pid
	}
	a := assignment("grp-a", "wi-1", "l1", "env")
	a.Context = testContext(t, a, "mode=stubborn")
	slot := e.start(t, a)
	pid := <-child
	e.pool.Preempt(slot, "l1")
	e.advance(time.Hour - time.Minute)
	if e.killed(slot) || !alive(pid) {
		t.Fatal("killed for ignoring a preemption request")
	}
	e.pool.LeaseLost(slot, "l1")
	e.advance(10 * time.Second)
	o := e.host.wait(t)
	if o.Kind != LeaseLost {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
	if alive(pid) {
		t.Fatalf("child %d of the killed program is still running", pid)
	}
}

// alive reports whether pid runs (a zombie waiting for an init that does
// not reap is dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}

// Bad output, silent exits and failing exits are failures with a reason.
func TestExecFailures(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	for _, tc := range []struct {
		name, script, reason string
		code                 protocol.Code
	}{
		{"garbage", `read x; echo 'not json'`, "output line 1", protocol.CodeProtocolViolation},
		{"unknown type", `read x; echo '{"type":"hello"}'`, "unknown message type", protocol.CodeProtocolViolation},
		{"unknown member", `read x; echo '{"type":"result","extra":1}'`, "unknown member", protocol.CodeProtocolViolation},
		{"case-folded member", `read x; echo '{"type":"fail","Reason":"x"}'`, "unknown member", protocol.CodeProtocolViolation},
		{"duplicate member", `read x; echo '{"type":"result","type":"result"}'`, "duplicate", protocol.CodeProtocolViolation},
		{"missing member", `read x; echo '{"type":"checkpoint","id":"c"}'`, "id and state are required", protocol.CodeProtocolViolation},
		{"bad base64", `read x; echo '{"type":"checkpoint","id":"c","state":"%%%"}'`, "base64", protocol.CodeProtocolViolation},
		{"unterminated", `read x; printf '{"type":"result"}'`, "not terminated", protocol.CodeProtocolViolation},
		{"toolDone without toolGo", `read x; echo '{"type":"toolDone","id":"t","output":""}'`, "answers no toolGo", protocol.CodeProtocolViolation},
		{"silent exit", `read x; echo oops >&2; exit 3`, "without a final message; stderr: oops", protocol.CodeInternalError},
		{"result then exit 1", `read x; echo '{"type":"result"}'; exit 1`, "exited with exit status 1", protocol.CodeInternalError},
		{"fail", `read x; echo '{"type":"fail","reason":"compiler crashed","permanent":true}'`, "compiler crashed", protocol.CodeInternalError},
		{"missing program", ``, "start", protocol.CodeInternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Exec{Path: "/bin/sh", Args: []string{"-c", tc.script}, Cap: protocol.Capability{ID: "sh", Version: "1.0.0"}}
			if tc.script == "" {
				h.Path = "/nonexistent/handler"
			}
			e := newEnv(t, 1, h)
			a := assignment("g", "wi", "l1", "sh")
			a.Contract.RetryPolicy = protocol.RetryPolicy{MaxAttempts: 3} // none of these may be retried...
			o := func() Outcome { e.start(t, a); return e.host.wait(t) }()
			if o.Kind != Failed || !strings.Contains(o.Reason, tc.reason) || protocol.CodeOf(o.Err) != tc.code {
				t.Fatalf("outcome %v %q (%v)", o.Kind, o.Reason, o.Err)
			}
			// ...except a silent or failing exit, which may be transient.
			if want := map[bool]uint64{true: 3, false: 1}[tc.code == protocol.CodeInternalError && tc.name != "fail" && tc.name != "missing program"]; o.Attempts != want {
				t.Fatalf("%d attempts, want %d", o.Attempts, want)
			}
		})
	}
}

// The context and checkpoint state reach the program unchanged.
func TestStartMessage(t *testing.T) {
	e := newEnv(t, 1)
	var got startMsg
	a := execAssignment("l1", `{"k":[1,2]}`)
	a.Extensions = protocol.Extensions{"urn:example:ext:gpu": {Critical: true, Data: json.RawMessage(`{"model":"L4"}`)}}
	runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
		var err error
		got, err = startMessage(w)
		return Result{}, err
	})
	if string(got.Context) != string(a.Context) || got.Contract.Notes != `{"k":[1,2]}` || got.Slot.LeaseID != "l1" || got.Protocol != ExecProtocol || got.Resume != nil ||
		string(got.Extensions["urn:example:ext:gpu"].Data) != `{"model":"L4"}` {
		t.Fatalf("start %+v", got)
	}
}

// The program's stderr reaches the worker's log: each line at DEBUG with
// the run's ids, and its last lines at WARN when the run fails.
func TestExecStderrLogged(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	var buf lockedLog
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := Exec{Path: "/bin/sh", Args: []string{"-c", `read x; echo "warming up" >&2; echo "disk on fire" >&2; exit 3`},
		Cap: protocol.Capability{ID: "sh", Version: "1.0.0"}, Logger: log}
	e := newEnv(t, 1, h)
	e.start(t, assignment("grp-a", "wi-7", "l1", "sh"))
	if o := e.host.wait(t); o.Kind != Failed {
		t.Fatalf("outcome %v", o.Kind)
	}
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="handler stderr"`, `line="warming up"`, `line="disk on fire"`, "group=grp-a", "item=wi-7", "lease=l1",
		`level=WARN msg="handler failed; the last lines of its stderr"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An artifact message carries the manifest fields a program knows: its
// schema, data classification and tool versions; an unknown
// classification is refused with an error reply, not the run.
func TestExecArtifactManifestFields(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	script := `read x
echo '{"type":"artifact","id":"a1","mediaType":"text/plain","schema":"s:x","classification":"confidential","toolVersions":{"pytest":"8.3.2"},"data":"aGk="}'
read r1
echo '{"type":"artifact","id":"a2","mediaType":"text/plain","classification":"secret","data":"aGk="}'
read r2
case "$r2" in
*'"type":"error"'*'INVALID_COMMAND'*) echo '{"type":"result"}' ;;
*) echo '{"type":"fail","reason":"a2 was not refused","permanent":true}' ;;
esac`
	e := newEnv(t, 1, Exec{Path: "/bin/sh", Args: []string{"-c", script}, Cap: protocol.Capability{ID: "sh", Version: "1.0.0"}})
	e.start(t, assignment("g", "wi", "l1", "sh"))
	if o := e.host.wait(t); o.Kind != Completed {
		t.Fatalf("outcome %v %q (%v)", o.Kind, o.Reason, o.Err)
	}
	e.host.mu.Lock()
	defer e.host.mu.Unlock()
	if len(e.host.published) != 1 {
		t.Fatalf("published %+v, want only a1", e.host.published)
	}
	a := e.host.published[0]
	if a.Schema != "s:x" || a.Classification != protocol.ClassConfidential || a.ToolVersions["pytest"] != "8.3.2" || string(a.Data) != "hi" {
		t.Fatalf("published %+v", a)
	}
}
