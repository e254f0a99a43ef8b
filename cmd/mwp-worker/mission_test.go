package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
)

// missionKit is `authority serve` with the human alice, the human bob
// (registered, in no Group) and an enrolled coordinator agent.
type missionKit struct {
	t         *testing.T
	bin       string
	keys      string
	url, fp   string
	authPub   string
	ck        protocol.PrivateKey
	authority *proc
}

func newMissionKit(t *testing.T) *missionKit {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	k := &missionKit{t: t, bin: buildBinary(t)}
	dir := t.TempDir()
	k.keys = filepath.Join(dir, "keys")
	writeKey(t, k.keys, "alice", protocol.ActorHuman, "alice")
	writeKey(t, k.keys, "bob", protocol.ActorHuman, "bob")
	k.ck = writeKey(t, k.keys, "coord", protocol.ActorAgent, "coord")
	cEnroll, _ := coordinatorEnrollment(t, dir, k.ck)
	ad := filepath.Join(dir, "authority")
	k.authority = startProc(t, k.bin, "authority", "serve", "--data", ad, "--listen", "127.0.0.1:0",
		"--human", "alice="+filepath.Join(k.keys, "alice.pub"), "--human", "bob="+filepath.Join(k.keys, "bob.pub"), "--enroll", cEnroll)
	k.url = k.authority.await(t, regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`), 10*time.Second)[1]
	k.fp = k.authority.await(t, regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`), 5*time.Second)[1]
	k.authPub = filepath.Join(ad, "authority.pub")
	return k
}

// mission runs `mwp-worker mission ARGS` as human and returns stdout,
// stderr and the exit status.
func (k *missionKit) mission(human string, args ...string) (string, string, int) {
	k.t.Helper()
	cmd := exec.Command(k.bin, append([]string{"mission"}, args...)...)
	cmd.Env = append(os.Environ(), "MWP_AUTHORITY="+k.url, "MWP_AUTHORITY_FINGERPRINT="+k.fp,
		"MWP_AUTHORITY_KEY="+k.authPub, "MWP_OWNER_KEY="+filepath.Join(k.keys, human+".key"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		k.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (k *missionKit) status(id string) missionStatus {
	k.t.Helper()
	out, errs, code := k.mission("alice", "status", id, "--json")
	var s missionStatus
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		k.t.Fatalf("status %s: %d %s %s", id, code, out, errs)
	}
	return s
}

// coordinator is the enrolled agent over the routes, with a session open.
func (k *missionKit) coordinator() *remote.Authority {
	k.t.Helper()
	apub, err := protocol.LoadPublicKey(k.authPub)
	if err != nil {
		k.t.Fatal(err)
	}
	a, err := remote.Dial(context.Background(), remote.Config{URL: k.url, Trust: remote.Trust{Pin: k.fp},
		Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, Key: k.ck, AuthorityKeys: protocol.NewKeySet(apub)})
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := a.OpenSession(context.Background()); err != nil {
		k.t.Fatal(err)
	}
	return a
}

func (k *missionKit) coordDo(a *remote.Authority, groupID string, typ protocol.CommandType, payload any) {
	k.t.Helper()
	one := protocol.Uint64(1)
	env := protocol.Envelope{GroupID: groupID, SessionEpoch: protocol.Uint64(a.SessionEpoch()), MembershipEpoch: one}
	if protocol.CarriesCoordinatorEpoch(typ) {
		env.CoordinatorEpoch = one
	}
	_, raw, err := protocol.BuildCommand(a.Actor(), k.ck, typ, env, payload, time.Now())
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := a.Submit(context.Background(), raw); err != nil {
		k.t.Fatalf("%s: %v", typ, err)
	}
}

// The mission commands against `authority serve`, each a process: start
// (twice: the same Mission), status, a refused approval, a watch that
// ends with the cancellation; a second Mission submitted for approval by
// the coordinator and approved.
func TestMultiProcessMission(t *testing.T) {
	k := newMissionKit(t)
	bugfix := filepath.Join("..", "..", "examples", "plans", "bugfix.yaml")
	start := []string{"start", bugfix, "--coordinator", "coord"}
	for range 2 {
		out, errs, code := k.mission("alice", start...)
		if code != 0 || out != "mission mis-fix-4711 group grp-fix-4711\n" {
			t.Fatalf("mission start: %d %q %s", code, out, errs)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nmission:\n  id: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := k.mission("alice", "start", bad, "--coordinator", "coord"); code != 1 || !strings.HasPrefix(errs, bad+":") {
		t.Fatalf("start of a bad plan: %d %s", code, errs)
	}
	s := k.status("mis-fix-4711")
	if s.State != protocol.MissionActive || s.Coordinator != "coord" || s.GroupID != "grp-fix-4711" || len(s.Stages) != 0 || s.Owner.ID != "alice" {
		t.Fatalf("status after start: %+v", s)
	}

	// The coordinator authorizes the plan's first stage (no worker is
	// needed for it to show).
	co := k.coordinator()
	data, err := os.ReadFile(bugfix)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse(bugfix, data)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := p.Authorize(p.Stages[0].ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	k.coordDo(co, "grp-fix-4711", protocol.CmdWorkAuthorize, &auth)
	s = k.status("mis-fix-4711")
	if len(s.Stages) != 1 || s.Stages[0].WorkItemID != auth.WorkItemID || s.Stages[0].State != protocol.WorkOpen {
		t.Fatalf("status after work.authorize: %+v", s)
	}
	if out, _, code := k.mission("alice", "status", "mis-fix-4711"); code != 0 || !strings.Contains(out, "mission mis-fix-4711 (group grp-fix-4711): active, coordinator coord") ||
		!strings.Contains(out, auth.WorkItemID) {
		t.Fatalf("status text: %d %s", code, out)
	}

	// Refusals: one line, the code, exit 1.
	if _, errs, code := k.mission("alice", "approve", "mis-fix-4711"); code != 1 || !strings.Contains(errs, "INVALID_STATE_TRANSITION") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("approve of an active Mission: %d %q", code, errs)
	}
	if _, errs, code := k.mission("bob", "status", "mis-fix-4711"); code != 1 || !strings.Contains(errs, "GROUP_NOT_FOUND") {
		t.Fatalf("status by a non-member: %d %q", code, errs)
	}
	if _, errs, code := k.mission("bob", "cancel", "mis-fix-4711"); code != 1 || !strings.Contains(errs, "GROUP_NOT_FOUND") {
		t.Fatalf("cancel by a non-member: %d %q", code, errs)
	}

	// A watch (not a terminal: appended lines) ends with the cancellation.
	watch := startProc(t, k.bin, "mission", "status", "mis-fix-4711", "--watch", "--authority", k.url, "--authority-fingerprint", k.fp,
		"--authority-key", k.authPub, "--owner-key", filepath.Join(k.keys, "alice.key"))
	watch.await(t, regexp.MustCompile(`mission mis-fix-4711 \(group grp-fix-4711\): active`), 10*time.Second)
	out, errs, code := k.mission("alice", "cancel", "mis-fix-4711", "--comment", "no longer needed")
	if code != 0 || !regexp.MustCompile(`^mission mis-fix-4711 cancelled event \d+\n$`).MatchString(out) {
		t.Fatalf("cancel: %d %q %s", code, out, errs)
	}
	watch.await(t, regexp.MustCompile(`mission mis-fix-4711 cancelled coordinator coord`), 10*time.Second)
	select {
	case err := <-watch.done:
		if err != nil {
			t.Fatalf("watch ended with %v:\n%s", err, watch.logs())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not end with the Mission:\n%s", watch.logs())
	}
	if s := k.status("mis-fix-4711"); s.State != protocol.MissionCancelled || len(s.Stages) != 1 || s.Stages[0].State != protocol.WorkCancelled {
		t.Fatalf("status after cancel: %+v", s)
	}

	// Approval: the coordinator submits a Mission with no WorkItems.
	notes := filepath.Join("..", "..", "examples", "plans", "release-notes.json")
	if out, errs, code := k.mission("alice", "start", notes, "--coordinator", "coord"); code != 0 || out != "mission mis-notes-2026-12 group grp-notes-2026-12\n" {
		t.Fatalf("start: %d %q %s", code, out, errs)
	}
	k.coordDo(co, "grp-notes-2026-12", protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{MissionID: "mis-notes-2026-12", Summary: "done",
		Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{{Subject: "mis-notes-2026-12", Criteria: protocol.List[string]{"done"}, Method: "review", Result: "pass",
			Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, Timestamp: protocol.NewTime(time.Now()), Artifacts: protocol.List[string]{}}}})
	if s := k.status("mis-notes-2026-12"); s.State != protocol.MissionAwaitingApproval {
		t.Fatalf("status after submit: %+v", s)
	}
	if out, errs, code := k.mission("alice", "approve", "mis-notes-2026-12", "--comment", "ship it"); code != 0 || !strings.HasPrefix(out, "mission mis-notes-2026-12 approved event ") {
		t.Fatalf("approve: %d %q %s", code, out, errs)
	}
	if _, errs, code := k.mission("alice", "request-changes", "mis-notes-2026-12", "--comment", "too late"); code != 1 || !strings.Contains(errs, "INVALID_STATE_TRANSITION") {
		t.Fatalf("request-changes of an approved Mission: %d %q", code, errs)
	}
}
