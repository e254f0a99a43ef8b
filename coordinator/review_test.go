package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// singlePlan is one stage with one check and no reviewer stage.
const singlePlan = `version: 1
mission: {id: mis-s, groupId: grp-s, title: Single, objective: One draft., deadline: 24h}
approval: {approvers: [erin]}
stages:
  - id: draft
    goal: Draft it.
    capability: {id: docs.write, version: 1.x}
    acceptance: [{id: done, description: Drafted., evidence: [the draft]}]
    outputs: [{name: notes, mediaType: text/markdown}]
    budgets: {money: 1}
    checks: [{name: lint, command: [lint, notes.md]}]
`

// semanticRule objects in the semantic step alone.
type semanticRule struct{ problem string }

func (semanticRule) Checks(context.Context, ReviewInput) []string { return nil }
func (s semanticRule) Semantic(context.Context, ReviewInput) []string {
	return []string{s.problem}
}

// The review's steps in the order of spec 13.2, each failing on its own
// fault, and stopping at the first that fails.
func TestReviewSteps(t *testing.T) {
	p := parsePlan(t, singlePlan)
	s := p.Stage("draft")
	notes := []byte("# notes\n")
	d := protocol.Digest(notes)
	input := protocol.Digest([]byte("request"))
	type fixture struct {
		v     *view
		store map[string][]byte
		io    reviewIO
	}
	cases := []struct {
		name   string
		tweak  func(*fixture)
		failed string // the step that fails; "" accepted
		detail string
	}{
		{"accepted", nil, "", ""},
		{"no manifest", func(f *fixture) { clear(f.v.manifests) }, StepIntegrity, "no manifest published for this item"},
		{"corrupt bytes", func(f *fixture) { f.store[d] = []byte("tampered") }, StepIntegrity, "does not match its manifest"},
		{"other producer", func(f *fixture) {
			m := f.v.manifests[[2]string{s.WorkItemID, d}]
			m.Producer.AgentID = "w9"
			f.v.manifests[[2]string{s.WorkItemID, d}] = m
		}, StepIntegrity, "not by the submitter"},
		{"no provenance", func(f *fixture) {
			f.io.provenance = true
			f.v.g.Items[s.WorkItemID].Contract.Inputs = protocol.List[protocol.InputRef]{{Artifact: input, Name: "request"}}
			m := f.v.manifests[[2]string{s.WorkItemID, d}]
			m.SourceArtifacts = nil
			f.v.manifests[[2]string{s.WorkItemID, d}] = m
		}, StepIntegrity, "provenance lacks input request"},
		{"provenance listed", func(f *fixture) {
			f.io.provenance = true
			f.v.g.Items[s.WorkItemID].Contract.Inputs = protocol.List[protocol.InputRef]{{Artifact: input, Name: "request"}}
		}, "", ""},
		{"output missing", func(f *fixture) {
			m := f.v.manifests[[2]string{s.WorkItemID, d}]
			m.MediaType = "text/plain"
			f.v.manifests[[2]string{s.WorkItemID, d}] = m
		}, StepIntegrity, "required output notes"},
		{"evidence fails", func(f *fixture) { f.v.item(s.WorkItemID).submission.evidence[0].Result = protocol.EvidenceFail }, StepIntegrity, "no passing evidence for criterion done"},
		{"check fails", func(f *fixture) {
			f.io.runCheck = func(context.Context, CheckRun) (CheckResult, error) { return CheckResult{ExitCode: 2}, nil }
		}, StepChecks, "check lint exited 2"},
		{"check cannot run", func(f *fixture) {
			f.io.runCheck = func(context.Context, CheckRun) (CheckResult, error) { return CheckResult{}, errors.New("no lint") }
		}, StepChecks, "no lint"},
		{"rule objects", func(f *fixture) { f.io.rules = semanticRule{"too short"} }, StepSemantic, "too short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fixture{v: stateView(t, p, protocol.WorkSubmitted), store: map[string][]byte{d: notes}}
			f.v.manifests[[2]string{s.WorkItemID, d}] = protocol.ArtifactManifest{ContentHash: d, MediaType: "text/markdown", Size: uint64(len(notes)),
				WorkItemID: s.WorkItemID, Producer: protocol.ArtifactProducer{AgentID: "w1"}, SourceArtifacts: protocol.List[string]{input}}
			f.v.item(s.WorkItemID).submission = &submission{seq: 9, agent: "w1", artifacts: []string{d},
				evidence: []protocol.Evidence{{Subject: s.WorkItemID, Criteria: protocol.List[string]{"done"}, Result: protocol.EvidencePass, Artifacts: protocol.List[string]{d}}}}
			var ran []CheckRun
			f.io = reviewIO{
				fetch: func(_ context.Context, x string) ([]byte, error) {
					if b, ok := f.store[x]; ok {
						return b, nil
					}
					return nil, protocol.Errorf(protocol.CodeInvalidCommand, "no %s", x)
				},
				runCheck: func(_ context.Context, run CheckRun) (CheckResult, error) {
					ran = append(ran, run)
					return CheckResult{}, nil
				},
			}
			if c.tweak != nil {
				c.tweak(f)
			}
			rec := review(context.Background(), f.v, p, s, f.io)
			if rec.Accepted != (c.failed == "") {
				t.Fatalf("accepted %v: %+v", rec.Accepted, rec.Steps)
			}
			var names []string
			for i, st := range rec.Steps {
				names = append(names, st.Name)
				if last := i == len(rec.Steps)-1; st.Passed == (last && c.failed != "") {
					t.Fatalf("step %s passed %v: %+v", st.Name, st.Passed, rec.Steps)
				}
			}
			want := []string{StepIntegrity, StepChecks, StepSemantic}
			if c.failed != "" {
				want = want[:slices.Index(want, c.failed)+1]
				if pr := strings.Join(rec.Steps[len(rec.Steps)-1].Problems, "; "); !strings.Contains(pr, c.detail) {
					t.Fatalf("%s problems %q, want %q", c.failed, pr, c.detail)
				}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("steps %v, want %v", names, want)
			}
			if c.name == "accepted" && (len(ran) != 1 || string(ran[0].Files["notes.md"]) != string(notes)) {
				t.Fatalf("the check ran with %+v, want notes.md holding the output", ran)
			}
		})
	}
}
