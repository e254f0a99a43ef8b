package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `coordinator run --input NAME=FILE` end to end, with `mission start
// --input` the same: the outside plan's `spec` comes from a file and `data`
// from the file beside the plan; the coordinator binds them to the digests
// mission start stored, so the contracts it authorizes match the Mission,
// and the worker's Python handler reads both by input name; the Mission
// ends approved. The coordinator logs with --log-format json: every line it
// writes through that run parses as JSON with enumerations by name, and its
// reviews name each deterministic check (`three-rows`) with its result.
func TestMultiProcessCoordinatorRunInputs(t *testing.T) {
	r := newCLIRig(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the worker keeps mwpslot.py for the handler
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
	for f, b := range map[string][]byte{planFile: []byte(owned), spec: []byte("Count the cities\n"),
		filepath.Join(dir, "inputs", "data.csv"): mustRead(t, "testdata/outside/inputs/data.csv")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	handler, err := filepath.Abs("testdata/outside/handler.py")
	if err != nil {
		t.Fatal(err)
	}
	w1 := r.startWorker("w1", nil, "outside.run="+handler)
	r.coordArgs = []string{"--input", "spec=" + spec, "--log-format", "json"}
	r.startArgs = []string{"--input", "spec=" + spec}
	coord := r.runMission(planFile, w1)

	lines := jsonLines(t, "coordinator run", coord.stderrText())
	reviews := withMsg(lines, "review")
	if len(reviews) == 0 {
		t.Fatalf("coordinator run logged no review:\n%s", coord.stderrText())
	}
	checked := false
	for _, l := range reviews {
		if c, _ := l["checks"].(string); l["item"] == "mis-outside:count" && l["accepted"] == true && c == "three-rows: pass" {
			checked = true
		}
	}
	if !checked {
		t.Fatalf("no accepted review of count naming its check three-rows:\n%s", coord.stderrText())
	}
}
