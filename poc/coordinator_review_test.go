package poc

import (
	"context"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/protocol"
)

// rulesCase is the PoC rules' view of an implementation submission whose
// patch is made by edit from the feature's correct implementation.
func rulesCase(t *testing.T, edit func(Tree), tweak func(*coordinator.ReviewInput)) (checks, semantic []string) {
	t.Helper()
	m := MissionA(base)
	st := m.WorkStages()[1]
	changed, err := ImplementFeature(TinyProject(), m.Feature, nil)
	if err != nil {
		t.Fatal(err)
	}
	edit(changed)
	patch := []byte(UnifiedDiff(TinyProject(), changed))
	d := protocol.Digest(patch)
	stage := m.Plan().Stage(st.WorkItemID)
	in := coordinator.ReviewInput{Stage: stage, Contract: st.Contract, Agent: "w1", Artifacts: []string{d},
		Evidence: EvidenceFor(st.Contract, st.WorkItemID, agent("w1"), base, map[string]piece{
			EvPatchApplies: {Result: protocol.EvidencePass, Method: "m", Artifacts: []string{d}},
			EvTestsTouched: {Result: protocol.EvidencePass, Method: "m", Artifacts: []string{d}}}),
		Outputs: map[string][]byte{MediaDiff: patch},
		Input: func(name string) ([]byte, string, error) {
			return nil, "", protocol.Errorf(protocol.CodeInvalidCommand, "no %s", name)
		}}
	if tweak != nil {
		tweak(&in)
	}
	r := Rules{Mission: m}
	return r.Checks(context.Background(), in), r.Semantic(context.Background(), in)
}

// The PoC's own rules: the deterministic step's evidence and business
// rules, the semantic step's reviewer of the diff. (Integrity is the
// coordinator package's.)
func TestRulesVerdicts(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(Tree)
		tweak  func(*coordinator.ReviewInput)
		step   string // the step whose rules object; "" none
		detail string
	}{
		{"accepted", func(Tree) {}, nil, "", ""},
		{"evidence cites a stranger", func(Tree) {}, func(in *coordinator.ReviewInput) {
			in.Evidence[0].Artifacts = protocol.List[string]{protocol.Digest([]byte("?"))}
		}, ReviewDeterministic, "neither submitted nor an input"},
		{"json that does not parse", func(Tree) {}, func(in *coordinator.ReviewInput) { in.Outputs[MediaJSON] = []byte("{") }, ReviewDeterministic, "does not parse"},
		{"todo in the diff", func(t Tree) { t["calc/clamp.go"] += "\n// TODO: negative intervals\n" }, nil, ReviewSemantic, "no-todo"},
		{"no test", func(t Tree) { delete(t, "calc/clamp_test.go") }, nil, ReviewSemantic, "tests-touched"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checks, semantic := rulesCase(t, c.edit, c.tweak)
			got := map[string][]string{ReviewDeterministic: checks, ReviewSemantic: semantic}
			for step, problems := range got {
				if want := step == c.step; want != (len(problems) > 0) {
					t.Fatalf("%s problems %q, want some: %v", step, problems, want)
				}
				if step == c.step && !strings.Contains(strings.Join(problems, "; "), c.detail) {
					t.Fatalf("%s problems %q, want %q", step, problems, c.detail)
				}
			}
		})
	}
}
