package poc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/protocol"
)

// Rules are the PoC's review rules in Go (coordinator.Rules): on top of
// the coordinator's artifact integrity, the business rules of each stage
// kind (the deterministic step) and a rule-based reviewer of the diff,
// the notes and the receipt (the semantic step).
type Rules struct {
	Mission MissionSpec
	// Project is the baseline patches apply to; nil is TinyProject().
	Project Tree
}

// Checks: every evidence record cites only submitted artifacts or
// inputs, JSON outputs parse, and the stage kind's business rules hold.
func (r Rules) Checks(_ context.Context, in coordinator.ReviewInput) []string {
	var p []string
	for _, ev := range in.Evidence {
		for _, a := range ev.Artifacts {
			if !slices.Contains(in.Artifacts, a) && !hasInput(in.Contract, a) {
				p = append(p, fmt.Sprintf("evidence for %s cites %s, neither submitted nor an input", strings.Join(ev.Criteria, ","), a))
			}
		}
	}
	if b, ok := in.Outputs[MediaJSON]; ok && !json.Valid(b) {
		p = append(p, "the "+MediaJSON+" output does not parse")
	}
	return append(p, r.stageRules(in, in.Outputs)...)
}

// Semantic is the rule-based reviewer's check of each stage's meaning.
func (r Rules) Semantic(_ context.Context, in coordinator.ReviewInput) []string {
	return r.semantic(in, in.Outputs)
}

func hasInput(c protocol.WorkContract, digest string) bool {
	return slices.ContainsFunc(c.Inputs, func(in protocol.InputRef) bool { return in.Artifact == digest })
}

// base is the tree the stage's patch applies to: the project, with the
// base-patch input of a rework applied.
func (r Rules) base(in coordinator.ReviewInput) (Tree, error) {
	project := r.Project
	if project == nil {
		project = TinyProject()
	}
	raw, _, err := in.Input(OutBasePatch)
	if err != nil {
		return project, nil
	}
	t, _, err := ApplyPatch(project, string(raw))
	return t, err
}

// stageRules are the deterministic business rules of each stage kind.
func (r Rules) stageRules(in coordinator.ReviewInput, data map[string][]byte) []string {
	var p []string
	switch r.Mission.kindOf(in.Stage.WorkItemID) {
	case StageRequirements:
		if _, err := FeatureFromNote(data[MediaMarkdown]); err != nil {
			p = append(p, "requirements note: "+err.Error())
		}
	case StageTesting:
		var r TestReport
		if err := json.Unmarshal(data[MediaJSON], &r); err != nil {
			return append(p, "test report: "+err.Error())
		}
		_, patch, _ := in.Input(OutPatch)
		if !r.Applied || !r.Passed || r.Tests == 0 {
			p = append(p, fmt.Sprintf("test report says applied=%v passed=%v packages=%d", r.Applied, r.Passed, r.Tests))
		}
		if r.Patch != patch {
			p = append(p, "the test report is for "+r.Patch+", not the input patch "+patch)
		}
	case StageLoad, StageSoak:
		_, patch, _ := in.Input(OutPatch)
		p = append(p, checkLoad(data[MediaJSON], in.Stage.WorkItemID, patch, r.Mission.kindOf(in.Stage.WorkItemID) == StageSoak)...)
	case StageIntegration:
		var r Receipt
		if err := json.Unmarshal(data[MediaJSON], &r); err != nil {
			return append(p, "receipt: "+err.Error())
		}
		_, patch, _ := in.Input(OutPatch)
		if r.PatchDigest != patch || r.Commit == "" || r.Key == "" {
			p = append(p, "the receipt does not record the input patch applied under a key")
		}
	}
	return p
}

// semantic is the reviewer's check of each stage's meaning.
func (r Rules) semantic(in coordinator.ReviewInput, data map[string][]byte) []string {
	base, err := r.base(in)
	if err != nil {
		return []string{"base-patch: " + err.Error()}
	}
	findings := func(r Review) []string {
		var p []string
		for _, f := range r.Findings {
			if f.Blocking {
				p = append(p, fmt.Sprintf("%s %s: %s", f.Rule, f.File, f.Detail))
			}
		}
		return p
	}
	switch r.Mission.kindOf(in.Stage.WorkItemID) {
	case StageRequirements:
		f, err := FeatureFromNote(data[MediaMarkdown])
		if err != nil {
			return []string{err.Error()}
		}
		var p []string
		note := string(data[MediaMarkdown])
		if !strings.Contains(note, "func "+f.Func+f.Signature) {
			p = append(p, "the note does not state the signature")
		}
		for _, c := range f.Cases {
			if !strings.Contains(note, f.Func+"("+c.Args+")") {
				p = append(p, "the note omits case "+c.Args)
			}
		}
		return p
	case StageImplementation:
		return findings(ReviewDiff(base, string(data[MediaDiff]), nil))
	case StageTesting, StageReview:
		patch, _, err := in.Input(OutPatch)
		if err != nil {
			return []string{err.Error()}
		}
		var rep *TestReport
		if raw, _, err := in.Input(OutTestReport); err == nil {
			rep = new(TestReport)
			if err := json.Unmarshal(raw, rep); err != nil {
				return []string{"test report: " + err.Error()}
			}
		} else if r.Mission.kindOf(in.Stage.WorkItemID) == StageTesting {
			rep = new(TestReport)
			_ = json.Unmarshal(data[MediaJSON], rep)
		}
		rv := ReviewDiff(base, string(patch), rep)
		p := findings(rv)
		if r.Mission.kindOf(in.Stage.WorkItemID) == StageReview {
			for _, c := range rv.Files {
				if !bytes.Contains(data[MediaMarkdown], []byte("`"+c.Path+"`")) {
					p = append(p, "the review notes omit "+c.Path)
				}
			}
		}
		return p
	case StageIntegration:
		patch, _, err := in.Input(OutPatch)
		if err != nil {
			return []string{err.Error()}
		}
		changes, err := ParsePatch(string(patch))
		if err != nil {
			return []string{err.Error()}
		}
		var r Receipt
		_ = json.Unmarshal(data[MediaJSON], &r)
		var want []string
		for _, c := range changes {
			want = append(want, c.Path)
		}
		if !slices.Equal(want, r.Files) {
			return []string{fmt.Sprintf("the receipt lists %v, the patch changes %v", r.Files, want)}
		}
	}
	return nil
}
