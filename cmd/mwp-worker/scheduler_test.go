package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/scheduler/simulate"
)

const simWorkload = `{"slots": 2,
 "groups": [{"id": "g1", "weight": 1}, {"id": "g2", "weight": 3, "quota": 2}],
 "items": [
  {"id": "a1", "group": "g1", "urgency": "low", "arrivalMs": 0, "durationMs": 100},
  {"id": "a2", "group": "g1", "urgency": "low", "arrivalMs": 0, "durationMs": 100},
  {"id": "b1", "group": "g2", "urgency": "normal", "arrivalMs": 0, "durationMs": 100},
  {"id": "b2", "group": "g2", "urgency": "normal", "arrivalMs": 0, "durationMs": 100, "preemptible": false},
  {"id": "b3", "group": "g2", "urgency": "critical", "arrivalMs": 10, "durationMs": 100, "deadlineMs": 150}
 ], "checkpointMs": 5}`

func simRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"mwp-worker", "scheduler", "simulate"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSchedulerSimulateJSON(t *testing.T) {
	code, out, errOut := simRun(t, "--json", writeTemp(t, simWorkload))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var last int64
	started, finished := map[string]bool{}, map[string]bool{}
	for _, l := range lines[:len(lines)-1] {
		var e map[string]any
		dec := json.NewDecoder(strings.NewReader(l))
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		// A preempt also names the waiting item it is for.
		if want := map[bool]int{false: 5, true: 6}[e["action"] == "preempt"]; len(e) != want {
			t.Fatalf("line %q: want exactly atMs, action, item, group, slot (and for, on a preempt)", l)
		}
		at := int64(e["atMs"].(float64))
		if at < last {
			t.Fatalf("events out of time order at %q", l)
		}
		last = at
		switch e["action"] {
		case "start":
			started[e["item"].(string)] = true
		case "finish":
			finished[e["item"].(string)] = true
		case "preempt":
			if e["item"] == "b2" {
				t.Fatal("non-preemptible item preempted")
			}
			if f, _ := e["for"].(string); f == "" {
				t.Fatalf("preemption %q is for no waiting item", l)
			}
		default:
			t.Fatalf("unknown action in %q", l)
		}
	}
	if len(finished) != 5 || len(started) != 5 {
		t.Fatalf("started %v finished %v", started, finished)
	}
	var sum struct {
		Summary simulate.Summary `json:"summary"`
	}
	dec := json.NewDecoder(strings.NewReader(lines[len(lines)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("summary line: %v", err)
	}
	if len(sum.Summary.Groups) != 2 || sum.Summary.SlotTimeMs != 500 || sum.Summary.DeadlineMisses != 0 {
		t.Fatalf("summary %+v", sum.Summary)
	}
}

func TestSchedulerSimulateTable(t *testing.T) {
	code, out, errOut := simRun(t, writeTemp(t, simWorkload))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"ACTION", "start", "finish", "GROUP", "WEIGHT SHARE", "g1", "g2", "deadline misses"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestSchedulerSimulateBadInput(t *testing.T) {
	item := func(extra string) string {
		return `{"slots": 1, "groups": [{"id": "g", "weight": 1}], "items": [` + extra + `]}`
	}
	for _, tc := range []struct{ name, body, want string }{
		{"invalid JSON", `{"slots": 1,`, "invalid workload JSON"},
		{"unknown member", `{"slots": 1, "groups": [{"id": "g", "weight": 1}], "speed": 2}`, `unknown field "speed"`},
		{"trailing data", item("") + `{}`, "after the top-level object"},
		{"zero slots", `{"slots": 0, "groups": [{"id": "g", "weight": 1}]}`, "slots must be"},
		{"zero weight", `{"slots": 1, "groups": [{"id": "g", "weight": 0}]}`, "weight must be a positive integer"},
		{"negative weight", `{"slots": 1, "groups": [{"id": "g", "weight": -2}]}`, "weight must be a positive integer"},
		{"zero quota", `{"slots": 1, "groups": [{"id": "g", "weight": 1, "quota": 0}]}`, "quota must be at least 1"},
		{"duplicate group", `{"slots": 1, "groups": [{"id": "g", "weight": 1}, {"id": "g", "weight": 2}]}`, "duplicate group id"},
		{"unknown group", item(`{"id": "a", "group": "h", "urgency": "low", "arrivalMs": 0, "durationMs": 1}`), `unknown group "h"`},
		{"unknown urgency", item(`{"id": "a", "group": "g", "urgency": "asap", "arrivalMs": 0, "durationMs": 1}`), `unknown urgency "asap"`},
		{"negative arrival", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": -1, "durationMs": 1}`), "arrivalMs must be"},
		{"negative duration", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0, "durationMs": -5}`), "durationMs must be"},
		{"negative deadline", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0, "durationMs": 1, "deadlineMs": -1}`), "deadlineMs must be"},
		{"missing duration", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0}`), "durationMs is required"},
		{"duplicate item", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0, "durationMs": 1},
			{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0, "durationMs": 1}`), "duplicate item id"},
		{"fractional time", item(`{"id": "a", "group": "g", "urgency": "low", "arrivalMs": 0.5, "durationMs": 1}`), "invalid workload JSON"},
		{"negative checkpoint", `{"slots": 1, "groups": [{"id": "g", "weight": 1}], "checkpointMs": -1}`, "checkpointMs must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := simRun(t, "--json", writeTemp(t, tc.body))
			if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, tc.want)
			}
		})
	}
	if code, _, errOut := simRun(t, filepath.Join(t.TempDir(), "missing.json")); code != 1 || errOut == "" {
		t.Fatalf("missing file: exit %d %q", code, errOut)
	}
	if code, _, _ := simRun(t); code != exitUsage {
		t.Fatalf("no FILE: exit %d", code)
	}
}

// FuzzSimulateInput: any bytes decode to a clear error or a workload the
// simulator runs to the end; nothing panics.
func FuzzSimulateInput(f *testing.F) {
	f.Add([]byte(simWorkload))
	f.Add([]byte(`{"slots": 1, "groups": [{"id": "g", "weight": 1}], "items": []}`))
	f.Add([]byte(`{"slots": 3, "groups": [{"id": "g", "weight": 2, "quota": 1}, {"id": "h", "weight": 5}], "items": [
	 {"id": "a", "group": "g", "urgency": "critical", "arrivalMs": 5, "durationMs": 0, "deadlineMs": 1, "preemptible": true},
	 {"id": "b", "group": "h", "urgency": "low", "arrivalMs": 0, "durationMs": 90}], "checkpointMs": 7}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := simulate.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(in.Items) > 200 {
			return // keep each run short
		}
		res, err := simulate.RunWith(in, simulate.Options{EventLimit: 100_000})
		if err != nil {
			return
		}
		if len(res.Items) != len(in.Items) {
			t.Fatalf("%d results for %d items", len(res.Items), len(in.Items))
		}
		if err := simulate.WriteJSON(&bytes.Buffer{}, res); err != nil {
			t.Fatal(err)
		}
	})
}
