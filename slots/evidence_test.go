package slots

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestEvidenceFor(t *testing.T) {
	c := protocol.WorkContract{AcceptanceCriteria: protocol.List[protocol.AcceptanceCriterion]{
		{ID: "tests", EvidenceRequired: []string{"unit", "lint"}},
		{ID: "docs", EvidenceRequired: []string{"review"}},
		{ID: "free", EvidenceRequired: nil},
	}}
	cases := []struct {
		name   string
		checks map[string]EvidenceCheck
		want   map[string][3]string // criterion -> result, method, artifacts
	}{
		{"all pass", map[string]EvidenceCheck{
			"unit":   {Result: protocol.EvidencePass, Method: "go test", Artifacts: []string{"sha256:b", "sha256:a"}},
			"lint":   {Result: protocol.EvidencePass, Method: "vet", Artifacts: []string{"sha256:a"}, Detail: "0 findings"},
			"review": {Result: protocol.EvidencePass, Method: "read"},
		}, map[string][3]string{
			"tests": {"pass", "unit: go test; lint: vet (0 findings)", "sha256:a sha256:b"},
			"docs":  {"pass", "review: read", ""},
			"free":  {"pass", "none", ""},
		}},
		{"first non-pass wins, unchecked is inconclusive", map[string]EvidenceCheck{
			"unit": {Result: protocol.EvidenceFail, Method: "go test"},
			"lint": {Result: protocol.EvidenceInconclusive, Method: "vet"},
		}, map[string][3]string{
			"tests": {"fail", "unit: go test; lint: vet", ""},
			"docs":  {"inconclusive", "review: not checked", ""},
			"free":  {"pass", "none", ""},
		}},
	}
	producer := protocol.Actor{Kind: protocol.ActorAgent, ID: "w"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := EvidenceFor(c, "mis:s", producer, tc.checks, t0)
			if len(ev) != 3 {
				t.Fatalf("%d records", len(ev))
			}
			for _, e := range ev {
				var arts string
				for i, a := range e.Artifacts {
					if i > 0 {
						arts += " "
					}
					arts += a
				}
				got := [3]string{string(e.Result), e.Method, arts}
				if got != tc.want[e.Criteria[0]] || e.Subject != "mis:s" || e.Producer != producer || !e.Timestamp.Equal(t0) {
					t.Errorf("%s: %+v, want %v", e.Criteria[0], e, tc.want[e.Criteria[0]])
				}
				if _, err := protocol.Marshal(e); err != nil {
					t.Errorf("%s does not encode: %v", e.Criteria[0], err)
				}
			}
		})
	}
}

// A handler's own lines go to the worker's logger with the run's ids, and
// Work.Evidence is EvidenceFor the run.
func TestWorkLoggerAndEvidence(t *testing.T) {
	var buf bytes.Buffer
	got := make(chan []protocol.Evidence, 1)
	e := newEnv(t, 1, handler("h", func(ctx context.Context, w *Work) (Result, error) {
		w.Logger().Info("handler says hello", "n", 1)
		got <- w.Evidence(map[string]EvidenceCheck{})
		return Result{}, nil
	}))
	e.pool.cfg.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	a := assignment("g", "wi", "l1", "h")
	a.Contract.AcceptanceCriteria = protocol.List[protocol.AcceptanceCriterion]{{ID: "ok", EvidenceRequired: []string{"x"}}}
	e.start(t, a)
	e.host.wait(t)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	for k, v := range map[string]any{"msg": "handler says hello", "n": 1.0, "group": "g", "mission": "mis-g", "item": "wi", "lease": "l1",
		"ownershipEpoch": 1.0, "attempt": 1.0, "capability": "h"} {
		if !reflect.DeepEqual(line[k], v) {
			t.Errorf("%s = %v, want %v in %s", k, line[k], v, buf.String())
		}
	}
	ev := <-got
	if len(ev) != 1 || ev[0].Subject != "wi" || ev[0].Producer.ID != "worker-1" || ev[0].Result != protocol.EvidenceInconclusive {
		t.Errorf("Evidence = %+v", ev)
	}
}
