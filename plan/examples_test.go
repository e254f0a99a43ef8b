package plan

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestExamples parses every plan of examples/plans and holds each to its
// shape, so an example that stops validating, or stops showing what it is
// there to show, fails here.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/plans/*")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	shapes := map[string]func(t *testing.T, p *Plan){
		"bugfix.yaml": func(t *testing.T, p *Plan) {
			assertOrder(t, p, "analyze", "implement", "test", "review")
			if len(p.Stage("implement").Checks) != 2 || len(p.Stage("test").Checks) != 1 || !reflect.DeepEqual(p.Stage("review").Reviews, []string{"implement", "test"}) {
				t.Error("bugfix: checks or reviewer lost")
			}
			if !reflect.DeepEqual(p.Approval.Approvers, []string{"alice"}) {
				t.Errorf("approvers %v", p.Approval.Approvers)
			}
		},
		"feature.yaml": func(t *testing.T, p *Plan) {
			assertOrder(t, p, "design", "api", "ui", "review")
			// Two parallel branches: neither depends on the other.
			for _, pair := range [][2]string{{"api", "ui"}, {"ui", "api"}} {
				for _, d := range p.Stage(pair[0]).DependsOn {
					if d.Stage == pair[1] {
						t.Errorf("%s depends on %s", pair[0], pair[1])
					}
				}
			}
			c, _ := p.Contract("api", start)
			if !c.Risk.PreExecutionApproval || c.Risk.Class != protocol.RiskHigh {
				t.Errorf("api risk %+v", c.Risk)
			}
		},
		// The two plans `mwp-worker up` runs with the example Python
		// handler: every stage needs its one capability and one JSON output.
		"echo-hello.yaml": func(t *testing.T, p *Plan) {
			assertOrder(t, p, "echo")
			assertEchoHandler(t, p)
		},
		"echo-pipeline.yaml": func(t *testing.T, p *Plan) {
			assertOrder(t, p, "gather", "summarize", "check")
			assertEchoHandler(t, p)
			if !reflect.DeepEqual(p.Stage("check").Reviews, []string{"summarize"}) {
				t.Errorf("check reviews %v", p.Stage("check").Reviews)
			}
		},
		"release-notes.json": func(t *testing.T, p *Plan) {
			assertOrder(t, p, "draft", "proofread")
			c, _ := p.Contract("proofread", start)
			want := protocol.List[protocol.Dependency]{{WorkItemID: "mis-notes-2026-12:draft", Policy: protocol.DependencySubmitted}}
			if !reflect.DeepEqual(c.Dependencies, want) || c.Deadline.String() != "2026-12-05T08:00:00Z" {
				t.Errorf("proofread: %v %v", c.Dependencies, c.Deadline)
			}
		},
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(name, data)
			if err != nil {
				t.Fatalf("%v", err)
			}
			for _, st := range p.Stages {
				a, err := p.Authorize(st.ID, start)
				if err != nil {
					t.Fatal(err)
				}
				checkContract(t, a)
			}
			shape, ok := shapes[name]
			if !ok {
				t.Fatalf("example %s has no shape check in this test", name)
			}
			shape(t, p)
		})
	}
}

func assertOrder(t *testing.T, p *Plan, ids ...string) {
	t.Helper()
	var got []string
	for _, st := range p.Stages {
		got = append(got, st.ID)
	}
	if !reflect.DeepEqual(got, ids) {
		t.Errorf("order %v, want %v", got, ids)
	}
}

// assertEchoHandler holds a plan to what examples/handlers/echo-handler.py
// can do: capability echo.run 1.x, one application/json output per stage.
func assertEchoHandler(t *testing.T, p *Plan) {
	t.Helper()
	for _, st := range p.Stages {
		if st.Capability != (protocol.Capability{ID: "echo.run", Version: "1.x"}) || len(st.Outputs) != 1 || st.Outputs[0].MediaType != "application/json" {
			t.Errorf("stage %s: %+v %+v is not what the echo handler provides", st.ID, st.Capability, st.Outputs)
		}
	}
}
