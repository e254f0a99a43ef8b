package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// Separate processes: a running `authority serve` with closed registration
// learns a new agent from `authority enroll` (the policy service's
// registration of the worker's enrollment), and that worker's `run` then
// opens its session; a coordinator enrolled the same way creates a Group
// and offers work there, and the worker, started without --group, learns
// the Group and wins the offer. No process is restarted. Refusals first: a
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
	hk := writeKey(t, keys, "alice", protocol.ActorHuman, "alice")
	ck := writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	authDir, workerDir := filepath.Join(dir, "authority"), filepath.Join(dir, "worker")
	auth := startProc(t, bin, "authority", "serve", "--data", authDir, "--listen", "127.0.0.1:0", "--closed-registration",
		"--policy", "org-policy="+filepath.Join(keys, "policy.pub"), "--human", "alice="+filepath.Join(keys, "alice.pub"))
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

	// A coordinator enrolled the same way, a Mission in a Group created
	// now, and the worker (started without --group) learns the Group from
	// the authority and wins its offer.
	cEnroll, card := coordinatorEnrollment(t, dir, ck)
	if out, code := enroll(cEnroll, "policy.key"); code != 0 {
		t.Fatalf("enroll coord: exit %d\n%s", code, out)
	}
	apub, err := protocol.LoadPublicKey(filepath.Join(authDir, "authority.pub"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := queue.Open(filepath.Join(dir, "coord"), queue.Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	co := openCoordinator(t, client.Config{URL: url, Trust: client.Trust{Pin: fp}, AgentID: "coord", Key: ck, Store: store, AuthorityKeys: protocol.NewKeySet(apub)}, card)
	t.Cleanup(co.stopOnce)
	co.logs = worker.logs
	alice, coord := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}
	one := protocol.Uint64(1)
	co.do(alice, hk, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp-a"}, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "demo", Objective: "enrolled at runtime", PriorityClass: protocol.PriorityNormal})
	co.do(alice, hk, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: "grp-a", MembershipEpoch: one},
		&protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})
	env := protocol.Envelope{GroupID: "grp-a", SessionEpoch: one, MembershipEpoch: one, CoordinatorEpoch: one}
	co.do(coord, ck, protocol.CmdMembershipChange, env, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w2"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	co.c.AddGroup("grp-a")
	now := time.Now()
	c := demoContract("wi-1", now)
	co.do(coord, ck, protocol.CmdWorkAuthorize, env, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
	co.do(coord, ck, protocol.CmdWorkOffer, env, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-wi-1", Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w2", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "demo.steps", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.5},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"test"}}}},
		ExpiresAt: protocol.NewTime(now.Add(10 * time.Minute))})
	if e := co.waitState("wi-1", protocol.WorkSubmitted); e.Owner != "w2" {
		t.Fatalf("wi-1 owner %q", e.Owner)
	}
	worker.awaitErr(t, "member of a new Group: subscribing", 5*time.Second)
	if auth.cmd.ProcessState != nil || worker.cmd.ProcessState != nil {
		t.Fatalf("a process exited:\n%s\n%s", auth.logs(), worker.logs())
	}
}
