package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// `mission start --input NAME=FILE` stores each input the plan names on
// the authority once the Mission exists, under the digest the plan's
// input is bound to (the --input file, and the file member beside the
// plan); a plan input nobody provides is refused on one line, exit 1,
// before anything is sent.
func TestMultiProcessMissionStartInputs(t *testing.T) {
	r := newCLIRig(t)
	dir := filepath.Join(r.dir, "outside")
	if err := os.MkdirAll(filepath.Join(dir, "inputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw := string(mustRead(t, outsidePlan))
	owned := strings.Replace(raw, "approvers: [alice]", "approvers: [owner]", 1) // the rig's human
	if owned == raw {
		t.Fatal("the plan's approver is not alice")
	}
	planFile, spec := filepath.Join(dir, "plan.yaml"), filepath.Join(r.dir, "spec.md")
	data := mustRead(t, "testdata/outside/inputs/data.csv")
	specData := []byte("Count the cities\n")
	for f, b := range map[string][]byte{planFile: []byte(owned), filepath.Join(dir, "inputs", "data.csv"): data, spec: specData} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ck := writeKey(t, r.keys, "coord", protocol.ActorAgent, "coord")
	cEnroll, _ := coordinatorEnrollment(t, r.dir, ck)
	r.enroll(cEnroll)
	owner := filepath.Join(r.keys, "owner.key")
	stored := func(b []byte) bool {
		hexPart := strings.TrimPrefix(protocol.Digest(b), "sha256:")
		got, err := os.ReadFile(filepath.Join(r.authDir, "artifacts", hexPart[:2], hexPart))
		return err == nil && bytes.Equal(got, b)
	}

	out, code := r.run("mission", "start", planFile, "--owner-key", owner, "--coordinator", "coord")
	want := "mwp-worker mission start: plan " + planFile + ` names input "spec" (line 20, stage gather) and nobody provides it: give --input NAME=FILE` + "\n"
	if code != 1 || out != want {
		t.Fatalf("mission start without spec: exit %d\n%q\nwant exit 1 and %q", code, out, want)
	}
	if stored(data) {
		t.Fatal("the refused start stored an input")
	}
	out, code = r.run("mission", "start", planFile, "--owner-key", owner, "--coordinator", "coord", "--input", "spec="+spec)
	if code != 0 || out != "mission mis-outside group grp-outside\n" {
		t.Fatalf("mission start --input: exit %d\n%s", code, out)
	}
	if !stored(specData) || !stored(data) {
		t.Fatalf("the authority does not hold the inputs: spec %v, data %v", stored(specData), stored(data))
	}
}
