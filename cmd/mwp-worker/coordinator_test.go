package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestMultiProcessPlanMissionCLIOnly is issue 13's path with nothing but
// the CLI: `authority serve`; a worker and a coordinator enrolled while it
// runs (`authority enroll`); `run` with the example Python handler and no
// --group; `coordinator run PLAN`; `mission start PLAN`; `mission approve`.
// The Mission ends approved in the log and no process was restarted.
func TestMultiProcessPlanMissionCLIOnly(t *testing.T) {
	r := newCLIRig(t)
	planFile, err := filepath.Abs("../../examples/plans/echo-hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w1 := r.startWorker("w1", nil, "echo.run="+r.handler)
	r.runMission(planFile, w1)
}

// One coordinator agent, one `coordinator run` of three plans, on one
// session: the Missions run at once and all end approved (a second
// process of the agent per plan would replace the first one's session).
func TestMultiProcessOneCoordinatorSeveralMissions(t *testing.T) {
	r := newCLIRig(t)
	raw := string(mustRead(t, "../../examples/plans/echo-hello.yaml"))
	var files []string
	for _, n := range []string{"1", "2", "3"} {
		f := filepath.Join(r.dir, "echo-hello-"+n+".yaml")
		src := strings.NewReplacer("mis-echo-hello", "mis-echo-hello-"+n, "grp-echo-hello", "grp-echo-hello-"+n).Replace(raw)
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	w1 := r.startWorker("w1", nil, "echo.run="+r.handler)
	r.runMissions(files, w1)
}

// Two workers on a remote authority, and a stage whose input another
// worker made: the handler's fetch of it is answered from the authority
// over the signed GET route (the reading worker's store does not hold it),
// hash-checked, and the pipeline ends approved.
func TestMultiProcessRemoteFetch(t *testing.T) {
	r := newCLIRig(t)
	raw := string(mustRead(t, "../../examples/plans/echo-pipeline.yaml"))
	// gather needs a capability only w1 has; summarize and check run on w2.
	split := strings.Replace(raw, "goal: Gather the inputs.\n    capability: {id: echo.run, version: 1.x}",
		"goal: Gather the inputs.\n    capability: {id: gather.run, version: 1.x}", 1)
	if split == raw {
		t.Fatal("the split plan is the same as the example")
	}
	planFile := filepath.Join(r.dir, "split.yaml")
	if err := os.WriteFile(planFile, []byte(split), 0o600); err != nil {
		t.Fatal(err)
	}
	w1 := r.startWorker("w1", nil, "gather.run="+r.handler)
	w2 := r.startWorker("w2", []string{"--log-level", "debug"}, "echo.run="+r.handler)
	r.runMission(planFile, w1, w2)
	// The echo handler fails for good when a fetch is refused, so the
	// approval says summarize read its input; w2's log says from where.
	read := regexp.MustCompile(`msg="input read from the authority".*item=mis-echo-pipeline:summarize artifact=(sha256:[0-9a-f]{64}) bytes=[1-9]\d* err=<nil>`).FindStringSubmatch(w2.logs())
	if read == nil || !strings.Contains(w1.logs(), "item=mis-echo-pipeline:gather") || !strings.Contains(w2.logs(), "run started") {
		t.Fatalf("summarize did not read gather's output from the authority:\nw1:\n%s\nw2:\n%s", w1.logs(), w2.logs())
	}
}

// cliRig is `authority serve` in its own process, with the keys of an
// Organization policy service, the plans' owner and a coordinator, and the
// example Python handler.
type cliRig struct {
	t                         *testing.T
	bin, dir, keys, handler   string
	authDir, url, fp, authPub string
	auth                      *proc
	workers                   []string
	// coordArgs and startArgs are added to `coordinator run` and to
	// `mission start` (the same --input values, say).
	coordArgs, startArgs []string
	// midway, when set, runs once every Mission has started, before the
	// rig waits for them to await approval.
	midway func()
	// seen holds the first Mission's stage states its metrics showed,
	// from mission start on (midway may record what it waited for).
	seen map[string]bool
	// ops is the running coordinator's operator endpoint (http://ADDR).
	ops string
}

// newCLIRig starts the rig's `authority serve` with authArgs added.
func newCLIRig(t *testing.T, authArgs ...string) *cliRig {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	r := &cliRig{t: t, bin: buildBinary(t), dir: t.TempDir(), handler: handler}
	r.keys = filepath.Join(r.dir, "keys")
	writeKey(t, r.keys, "policy", protocol.ActorService, "org-policy")
	writeKey(t, r.keys, "owner", protocol.ActorHuman, "owner") // the plans' approver
	r.authDir = filepath.Join(r.dir, "authority")
	r.auth = startProc(t, r.bin, append([]string{"authority", "serve", "--data", r.authDir, "--listen", "127.0.0.1:0", "--closed-registration",
		"--policy", "org-policy=" + filepath.Join(r.keys, "policy.pub"), "--human", "owner=" + filepath.Join(r.keys, "owner.pub")}, authArgs...)...)
	r.url = r.auth.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	r.fp = r.auth.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]
	r.authPub = filepath.Join(r.authDir, "authority.pub")
	return r
}

// restartAuthority stops the rig's authority with a signal and starts it
// again with the same flags on the same address; it returns the stopped
// process.
func (r *cliRig) restartAuthority() *proc {
	r.t.Helper()
	old := r.stopAuthority()
	r.startAuthorityAgain(old)
	return old
}

// stopAuthority stops the rig's authority with a signal and returns it.
func (r *cliRig) stopAuthority() *proc {
	t := r.t
	t.Helper()
	old := r.auth
	if err := old.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-old.done:
		old.done <- err
		if err != nil {
			t.Fatalf("authority serve after a signal: %v\n%s", err, old.logs())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("authority serve did not stop on a signal:\n%s", old.logs())
	}
	return old
}

// startAuthorityAgain starts the stopped authority old again, with the
// same flags on the same address.
func (r *cliRig) startAuthorityAgain(old *proc) {
	t := r.t
	t.Helper()
	u, err := url.Parse(r.url)
	if err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(old.cmd.Args[1:])
	args[slices.Index(args, "--listen")+1] = u.Host
	r.auth = startProc(t, r.bin, args...)
	r.auth.await(t, regexp.MustCompile(`listening on wss://`), 10*time.Second)
}

// run runs one command of the binary against the rig's authority.
func (r *cliRig) run(args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Env = append(os.Environ(), "MWP_AUTHORITY="+r.url, "MWP_AUTHORITY_FINGERPRINT="+r.fp, "MWP_AUTHORITY_KEY="+r.authPub)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return out.String(), code
}

// enroll registers an enrollment file with the running authority.
func (r *cliRig) enroll(file string) {
	r.t.Helper()
	if out, code := r.run("authority", "enroll", "--data", r.authDir, "--policy-key", filepath.Join(r.keys, "policy.key"), file); code != 0 {
		r.t.Fatalf("authority enroll %s: exit %d\n%s", file, code, out)
	}
}

// startWorker enrols agent id while the authority runs and starts its
// `run --authority` with the handlers and the extra flags, without --group.
func (r *cliRig) startWorker(id string, extra []string, handlers ...string) *proc {
	r.t.Helper()
	writeKey(r.t, r.keys, id, protocol.ActorAgent, id)
	data, key := filepath.Join(r.dir, id), filepath.Join(r.keys, id+".key")
	var hs []string
	for _, h := range handlers {
		hs = append(hs, "--handler-exec", h)
	}
	enroll := filepath.Join(r.dir, id+"-enroll.json")
	if out, code := r.run(append([]string{"run", "--data", data, "--key", key, "--enrollment", enroll}, hs...)...); code != 0 {
		r.t.Fatalf("run --enrollment: exit %d\n%s", code, out)
	}
	r.enroll(enroll)
	p := startProc(r.t, r.bin, append(append([]string{"run", "--data", data, "--key", key, "--authority", r.url,
		"--authority-fingerprint", r.fp, "--authority-key", r.authPub}, extra...), hs...)...)
	p.await(r.t, regexp.MustCompile(`agent `+id+` session 1 open`), 15*time.Second)
	r.workers = append(r.workers, id)
	return p
}

// runMission enrols the coordinator, runs `coordinator run PLAN` with the
// rig's workers and `mission start PLAN`, approves the Mission once it
// awaits approval, and checks that it ends approved with no process
// restarted.
func (r *cliRig) runMission(planFile string, workers ...*proc) *proc {
	r.t.Helper()
	return r.runMissions([]string{planFile}, workers...)
}

// runMissions is runMission with several plans, all coordinated by one
// `coordinator run PLAN...` of one agent. It returns the coordinator's
// process, ended.
func (r *cliRig) runMissions(planFiles []string, workers ...*proc) *proc {
	t := r.t
	t.Helper()
	var missions []string
	for _, f := range planFiles {
		pl, err := plan.Parse(f, mustRead(t, f))
		if err != nil {
			t.Fatal(err)
		}
		missions = append(missions, pl.Mission.ID)
	}
	ck := writeKey(t, r.keys, "coord", protocol.ActorAgent, "coord")
	cEnroll, _ := coordinatorEnrollment(t, r.dir, ck)
	r.enroll(cEnroll)
	args := append([]string{"coordinator", "run"}, planFiles...)
	args = append(args, "--key", filepath.Join(r.keys, "coord.key"),
		"--authority", r.url, "--authority-fingerprint", r.fp, "--authority-key", r.authPub, "--metrics-listen", "127.0.0.1:0")
	args = append(args, r.coordArgs...)
	for _, w := range r.workers {
		args = append(args, "--worker", w)
	}
	coord := startProc(t, r.bin, args...)
	ops := coord.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+)/metrics`), 10*time.Second)[1]
	// Connected and idle, no Mission names it yet: ready all the same.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if code, _ := httpGet(t, ops+"/readyz"); code == 200 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("coordinator /readyz %d while connected and idle:\n%s", code, coord.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := metricValue(t, ops, `mwp_coordinator_missions{state="pending"}`); v != float64(len(planFiles)) {
		t.Fatalf("Missions pending before mission start: %v, want %d", v, len(planFiles))
	}
	owner := filepath.Join(r.keys, "owner.key")
	for i, f := range planFiles {
		pl, _ := plan.Parse(f, mustRead(t, f))
		if out, code := r.run(append([]string{"mission", "start", f, "--owner-key", owner, "--coordinator", "coord"}, r.startArgs...)...); code != 0 ||
			out != "mission "+missions[i]+" group "+pl.Mission.GroupID+"\n" {
			t.Fatalf("mission start: exit %d\n%s", code, out)
		}
	}
	r.ops = ops
	r.seen = map[string]bool{}
	if r.midway != nil {
		r.midway()
	}
	logs := func() string {
		var b strings.Builder
		b.WriteString("coordinator:\n" + coord.logs())
		for i, w := range workers {
			b.WriteString("\n" + r.workers[i] + ":\n" + w.logs())
		}
		return b.String()
	}
	state := func(mission string) string {
		out, code := r.run("mission", "status", mission, "--owner-key", owner, "--json")
		var s missionStatus
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
			t.Fatalf("mission status: exit %d\n%s\n%s", code, out, logs())
		}
		return string(s.State)
	}
	seen := r.seen
	for i, mission := range missions {
		for deadline := time.Now().Add(90 * time.Second); state(mission) != "awaiting_approval"; {
			if time.Now().After(deadline) {
				t.Fatalf("Mission %s never awaited approval; %s", mission, logs())
			}
			if i == 0 {
				for _, st := range stageStates {
					if metricValue(t, ops, fmt.Sprintf(`mwp_coordinator_stages{mission=%q,state=%q}`, mission, st)) > 0 {
						seen[string(st)] = true
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		pl, _ := plan.Parse(planFiles[i], mustRead(t, planFiles[i]))
		waitMetric(t, ops, fmt.Sprintf(`mwp_coordinator_stages{mission=%q,state="verified"}`, mission), float64(len(pl.Stages)))
		if v := metricValue(t, ops, fmt.Sprintf(`mwp_coordinator_reviews_total{mission=%q,result="accepted"}`, mission)); v < float64(len(pl.Stages)) {
			t.Fatalf("Mission %s: %v reviews accepted, want one per stage at least", mission, v)
		}
		if i == 0 && !(seen["offered"] || seen["queued"] || seen["active"] || seen["submitted"]) {
			t.Fatalf("the metrics never showed a stage of %s on its way (states seen %v)", mission, seen)
		}
		if i == 0 {
			out, code := r.run("mission", "status", mission, "--owner-key", owner)
			if code != 0 {
				t.Fatalf("mission status: exit %d\n%s", code, out)
			}
			checkReviewView(t, out, pl, owner)
		}
		if out, code := r.run("mission", "approve", mission, "--owner-key", owner, "--comment", "looks right"); code != 0 ||
			!strings.HasPrefix(out, "mission "+mission+" approved event ") {
			t.Fatalf("mission approve: exit %d\n%s", code, out)
		}
	}
	select {
	case err := <-coord.done:
		coord.done <- err
		if err != nil {
			t.Fatalf("coordinator run: %v\n%s", err, coord.logs())
		}
		for _, mission := range missions {
			if !strings.Contains(coord.stdout(), "mission "+mission+" approved\n") {
				t.Fatalf("coordinator run did not print Mission %s approved:\n%s", mission, coord.logs())
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("coordinator run did not end with the Missions approved:\n%s", coord.logs())
	}
	for _, mission := range missions {
		if s := state(mission); s != "approved" {
			t.Fatalf("Mission %s is %s in the log, want approved", mission, s)
		}
	}
	procs := map[string]*proc{"authority": r.auth}
	for i, w := range workers {
		procs[r.workers[i]] = w
	}
	for name, p := range procs {
		select {
		case err := <-p.done:
			t.Fatalf("%s exited (%v): nothing may restart\n%s", name, err, p.logs())
		default:
		}
	}
	return coord
}

// `coordinator run` refuses, as a usage error, no plan and two plans that
// name one Mission or one Group: each runs as its own Mission.
func TestCoordinatorRunPlanArguments(t *testing.T) {
	echo := "../../examples/plans/echo-hello.yaml"
	raw := string(mustRead(t, echo))
	sameGroup := writeTemp(t, strings.Replace(raw, "id: mis-echo-hello", "id: mis-echo-hello-2", 1))
	flags := []string{"--key", "coord.key", "--worker", "w1", "--authority", "wss://127.0.0.1:1/mwp", "--authority-key", "authority.pub"}
	for _, tc := range []struct {
		name  string
		plans []string
		want  string
	}{
		{"no plan", nil, "mwp-worker coordinator run: want PLAN..., got 0 arguments"},
		{"one Mission twice", []string{echo, echo}, "both name Mission mis-echo-hello"},
		{"one Group twice", []string{echo, sameGroup}, "both name Group grp-echo-hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append(append([]string{"coordinator", "run"}, tc.plans...), flags...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// checkReviewView checks `mission status` of a Mission awaiting approval:
// its stages in plan order in aligned columns, then per stage the
// handler's evidence, its outputs by name with a preview and the review in
// one line, then the command that approves.
func checkReviewView(t *testing.T, out string, pl *plan.Plan, owner string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) < len(pl.Stages)+1 || strings.Contains(out, "log at") {
		t.Fatalf("mission status:\n%s", out)
	}
	col := -1
	for i, st := range pl.Stages {
		l := lines[1+i]
		if !strings.HasPrefix(l, "  "+st.WorkItemID+" ") {
			t.Fatalf("stage line %d is %q, want stage %s (plan order):\n%s", i, l, st.WorkItemID, out)
		}
		c := strings.Index(l, "verified")
		if col >= 0 && c != col {
			t.Fatalf("the state column is not aligned:\n%s", out)
		}
		col = c
	}
	for _, st := range pl.Stages {
		if !strings.Contains(out, "\nstage "+st.WorkItemID+": verified\n") {
			t.Fatalf("no review section of stage %s:\n%s", st.ID, out)
		}
		for _, o := range st.Outputs {
			if !strings.Contains(out, "  output    "+o.Name+" ("+o.MediaType+", ") {
				t.Fatalf("no output %s of stage %s by name:\n%s", o.Name, st.ID, out)
			}
		}
	}
	for _, want := range []string{"  evidence  [pass] ", "  review    artifact-integrity: pass; deterministic-checks",
		"to approve:          mwp-worker mission approve " + pl.Mission.ID + " --owner-key " + owner} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in mission status:\n%s", want, out)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "sha256:") && !strings.HasPrefix(l, "  output    ") {
			t.Fatalf("mission status shows a bare digest: %q\n%s", l, out)
		}
	}
}
