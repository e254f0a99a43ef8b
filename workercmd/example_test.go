package workercmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/protocol"
)

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// buildExample builds examples/go-handler, the ten-line embedding.
func buildExample(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go toolchain to build the example")
		}
	}
	bin := filepath.Join(t.TempDir(), "go-handler")
	build := exec.Command(goBin, "build", "-o", bin, "./examples/go-handler")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/go-handler: %v\n%s", err, out)
	}
	return bin
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// The example program has run's whole command line: --help lists every
// flag of run, a bad flag is one line and exit 2; and as a worker on an
// authority embedded in this test it wins an offer for its Go handler's
// capability (learning its Group from the authority, no --group), submits
// the handler's result, and a SIGINT stops it with status 0.
func TestGoHandlerExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example")
	}
	bin := buildExample(t)
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if exitCode(t, err) != 0 {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range Command(Options{}).Flags {
		if name := f.Names()[0]; !strings.Contains(string(out), "--"+name) {
			t.Errorf("--help does not name --%s", name)
		}
	}
	out, err = exec.Command(bin, "--bogus").CombinedOutput()
	if code := exitCode(t, err); code != ExitUsage || string(out) != "go-handler: flag provided but not defined: -bogus; see go-handler --help\n" {
		t.Fatalf("--bogus: exit %d\n%s", code, out)
	}

	dir := t.TempDir()
	auth, err := embed.Start(embed.Config{Dir: filepath.Join(dir, "authority")})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	svc := auth.Service
	ctx := context.Background()
	key, err := protocol.GenerateKey("agent:w1#k1", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, _, err := protocol.WriteKeyFiles(dir, "w1", key)
	if err != nil {
		t.Fatal(err)
	}
	data, enrollment := filepath.Join(dir, "worker"), filepath.Join(dir, "w1-enroll.json")
	if out, err := exec.Command(bin, "--data", data, "--key", keyFile, "--enrollment", enrollment).CombinedOutput(); err != nil {
		t.Fatalf("--enrollment: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(enrollment)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Submit(ctx, "", bytes.TrimSpace(raw)); err != nil {
		t.Fatalf("enroll: %v", err)
	}
	if c, _ := svc.AgentCard("w1"); len(c.Capabilities) != 1 || c.Capabilities[0].ID != "text.echo" {
		t.Fatalf("the card names %v, want the Go handler's text.echo", c.Capabilities)
	}

	hk, _ := protocol.GenerateKey("human:alice#k1", rand.Reader)
	if err := svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	ck, _ := protocol.GenerateKey("agent:coord#k1", rand.Reader)
	coord := svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, ck)
	if err := coord.Join(ctx, protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "coord",
		Capabilities: protocol.List[protocol.Capability]{{ID: "coordination", Version: "1.0.0"}},
		Roles:        protocol.List[protocol.Role]{protocol.RoleCoordinator}, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	do := func(p *authoritylite.Principal, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(ctx, typ, "grp-a", payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	do(alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "echo", Objective: "a Go handler", PriorityClass: protocol.PriorityNormal})
	do(alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})

	var stdout, stderr syncBuffer
	worker := exec.Command(bin, "--data", data, "--key", keyFile, "--authority", auth.URL, "--authority-fingerprint", auth.Fingerprint)
	worker.Stdout, worker.Stderr = &stdout, &stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer func() { _ = worker.Process.Kill() }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s in time\nstdout:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
			}
		}
	}
	waitFor("session", func() bool { return strings.Contains(stdout.String(), "agent w1 session 1 open") })

	do(coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	now := time.Now()
	c := echoContract(now)
	do(coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
	do(coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-1", Contract: c, ExpiresAt: protocol.NewTime(now.Add(time.Hour)),
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "text.echo", Required: "1.x", Offered: "1.0.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{WallClockSeconds: protocol.Float64(1)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"test"}}}}})
	waitFor("wi-1 submitted", func() bool {
		w, ok := svc.WorkItem("grp-a", "wi-1")
		return ok && w.State == protocol.WorkSubmitted
	})

	if err := worker.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if code := exitCode(t, err); code != 0 {
			t.Fatalf("exit %d after SIGINT\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGINT\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "run: stopping at the next safe points") || !strings.Contains(stdout.String(), "stopped: 1 outcomes") {
		t.Fatalf("no drain report\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

func echoContract(now time.Time) protocol.WorkContract {
	return protocol.WorkContract{
		ContractID: "wc-1", Revision: 1, Goal: "say hello",
		RequiredOutputs: protocol.List[protocol.OutputSpec]{{Name: "text", MediaType: "text/plain"}},
		AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
			{ID: "ac-1", Description: "the goal echoed", EvidenceRequired: protocol.List[string]{"text"}}},
		Inputs: protocol.List[protocol.InputRef]{}, Dependencies: protocol.List[protocol.Dependency]{},
		AllowedTools: protocol.List[string]{}, AllowedData: protocol.List[string]{}, AllowedOperations: protocol.List[string]{"read"},
		ResourceLimits:       protocol.ResourceLimits{MemoryMiB: protocol.Uint64(64)},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "text.echo", Version: "1.x"}},
		Deadline:             protocol.NewTime(now.Add(time.Hour)), Urgency: protocol.UrgencyNormal, BusinessImpact: protocol.ImpactMedium,
		Budgets: protocol.Budgets{WallClockSeconds: protocol.Float64(3600)},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 1, Backoff: protocol.Backoff{InitialMs: 100, MaxMs: 1000, Multiplier: 2},
			AttemptTimeoutMs: 600000, CostLimit: 1},
		Risk: protocol.Risk{Class: protocol.RiskLow},
	}
}
