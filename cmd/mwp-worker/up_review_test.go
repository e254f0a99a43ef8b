package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/poc"
	"github.com/missionweave/mwp-worker/protocol"
)

// What `up` shows a terminal before the decision: per stage in plan
// order, the handler's evidence, the outputs by name with a preview and
// the review in one line, not the approval projection's review records.
func TestUpReviewShowsStages(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example handler cannot run")
	}
	bin := buildBinary(t)
	handler, err := filepath.Abs("../../examples/handlers/echo-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	planFile := "../../examples/plans/echo-pipeline.yaml"
	if out, err := exec.Command(bin, "up", planFile, "--auto-approve", "--data", data, "--log-level", "warn",
		"--handler-exec", "echo.run="+handler).CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	pl, err := plan.Parse(planFile, mustRead(t, planFile))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := authoritylite.Open(authoritylite.Config{Dir: filepath.Join(data, "authority")})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	src := poc.ServiceSource{Service: svc, Human: protocol.Actor{Kind: protocol.ActorHuman, ID: pl.Approval.Approvers[0]}}
	var b strings.Builder
	if err := poc.ShowReview(context.Background(), src)(&b, poc.PendingMission{GroupID: pl.Mission.GroupID, Summary: "all stages verified"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	last := -1
	for _, st := range pl.Stages {
		i := strings.Index(out, "\nstage "+st.WorkItemID+": verified\n")
		if i < last {
			t.Fatalf("stage %s missing or out of plan order:\n%s", st.ID, out)
		}
		last = i
		for _, o := range st.Outputs {
			if !strings.Contains(out, "  output    "+o.Name+" ("+o.MediaType+", ") {
				t.Fatalf("no output %s by name:\n%s", o.Name, out)
			}
		}
	}
	if !strings.Contains(out, "  evidence  [pass] ") || !strings.Contains(out, "  review    artifact-integrity: pass") ||
		!strings.Contains(out, "summary: all stages verified") || strings.Contains(out, "coordinator review:") {
		t.Fatalf("review:\n%s", out)
	}
}
