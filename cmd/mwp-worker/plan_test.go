package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/plan"
)

const badPlan = `version: 1
mission: {id: m, groupId: g, title: t, objective: o, deadline: 1h}
approval: {approvers: [h]}
stages:
  - id: a
    goal: g
    capability: {id: c, version: "^1"}
    acceptance: [{id: x, description: d, evidence: [e]}]
    outputs: [{name: o, mediaType: text/plain}]
    budgets: {money: 1}
    dependsOn: [b]
    size: 3
`

func TestPlanValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(badPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join("..", "..", "examples", "plans", "bugfix.yaml")

	code, out, errOut := runCLI(t, "plan", "validate", good)
	if code != 0 || out != good+": ok, 4 stages\n" {
		t.Fatalf("good plan: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "plan", "validate", good, bad)
	want := good + ": ok, 4 stages\n" +
		bad + `:7:34: version range "^1" is not MAJOR.x, MAJOR.MINOR.x or an exact MAJOR.MINOR.PATCH` + "\n" +
		bad + `:11:17: stage "a" depends on unknown stage "b"` + "\n" +
		bad + `:12:5: unknown member "size"` + "\n"
	if code != 1 || out != want {
		t.Fatalf("bad plan: %d\n%s\nwant\n%s", code, out, want)
	}

	code, out, _ = runCLI(t, "plan", "validate", "--json", good, bad, filepath.Join(dir, "missing.yaml"))
	if code != 1 {
		t.Fatalf("--json exit %d", code)
	}
	var got []planResult
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r planResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%v in %s", err, out)
		}
		got = append(got, r)
	}
	if len(got) != 3 || !got[0].OK || got[0].Stages != 4 || len(got[0].Problems) != 0 ||
		got[1].OK || len(got[1].Problems) != 3 {
		t.Fatalf("--json: %+v", got)
	}
	if p := got[1].Problems[2]; !reflect.DeepEqual(p, plan.Problem{Line: 12, Column: 5, Path: "/stages/0/size", Message: `unknown member "size"`}) {
		t.Errorf("problem %+v", p)
	}
	if got[2].OK || !strings.HasPrefix(got[2].Error, "cannot read: ") {
		t.Errorf("missing file: %+v", got[2])
	}
	// The wire names are the documented ones (docs/shapes.md).
	for _, key := range []string{`"file":`, `"ok":`, `"stages":`, `"problems":[{"line":7,"column":34,"path":"/stages/0/capability/version","message":`} {
		if !strings.Contains(out, key) {
			t.Errorf("--json output lacks %s:\n%s", key, out)
		}
	}

	if code, _, errOut := runCLI(t, "plan", "validate"); code != 2 || !strings.Contains(errOut, "want FILE..., got 0 arguments") {
		t.Errorf("no FILE: %d %q", code, errOut)
	}
}

func TestPlanValidateStdinAndSize(t *testing.T) {
	r := validatePlan("-", strings.NewReader(badPlan))
	if r.OK || len(r.Problems) != 3 {
		t.Fatalf("stdin: %+v", r)
	}
	r = validatePlan("-", bytes.NewReader(make([]byte, plan.MaxSize+10)))
	if r.OK || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Message, "larger than") {
		t.Fatalf("oversized: %+v", r)
	}
}

func TestPlanSchema(t *testing.T) {
	code, out, _ := runCLI(t, "plan", "schema")
	if code != 0 || out != string(plan.Schema) {
		t.Fatalf("schema: %d", code)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["$id"] != plan.SchemaID {
		t.Fatalf("schema is not JSON with the $id: %v", err)
	}
}

// TestPlanValidateBinary runs the built binary: the exit status a shell
// script sees, and a plan on stdin.
func TestPlanValidateBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	good := filepath.Join("..", "..", "examples", "plans", "feature.yaml")
	out, err := exec.Command(bin, "plan", "validate", good).Output()
	if err != nil || string(out) != good+": ok, 4 stages\n" {
		t.Fatalf("good plan: %v %q", err, out)
	}
	cmd := exec.Command(bin, "plan", "validate", "-")
	cmd.Stdin = strings.NewReader(badPlan)
	out, err = cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || strings.Count(string(out), "\n") != 3 || !strings.HasPrefix(string(out), "-:7:34: ") {
		t.Fatalf("bad plan on stdin: %v %q", err, out)
	}
}
