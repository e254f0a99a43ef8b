package poc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The coordinator's review of a submission, in the order of spec 13.2:
// artifact integrity and required outputs first, then the deterministic
// tests and business rules, then the reviewer's semantic check (here the
// rule-based reviewer over the diff), then the combined verdict. Every step
// runs, so the record shows each result, but only an all-pass verdict
// accepts.

// The review steps, in order.
const (
	ReviewIntegrity     = "artifact-integrity"
	ReviewDeterministic = "deterministic-checks"
	ReviewSemantic      = "semantic-review"
)

// ReviewStep is one step's outcome.
type ReviewStep struct {
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Problems []string `json:"problems"`
}

// ReviewRecord is the review of one submission.
type ReviewRecord struct {
	WorkItemID string       `json:"workItemId"`
	Submission uint64       `json:"submission"` // sequence of its work.submitted
	Steps      []ReviewStep `json:"steps"`
	Accepted   bool         `json:"accepted"`
}

// reviewInput is everything a review reads: the view's submission and
// manifests, the stage, and verified artifact bytes.
type reviewInput struct {
	item       *itemView
	stage      Stage
	manifests  map[string]protocol.ArtifactManifest
	fetch      func(digest string) ([]byte, error)
	project    Tree
	provenance bool
}

// review runs the three steps over a submission.
func review(in reviewInput) ReviewRecord {
	sub := in.item.submission
	rec := ReviewRecord{WorkItemID: in.item.id, Submission: sub.seq}
	data := map[string][]byte{}
	integrity := ReviewStep{Name: ReviewIntegrity}
	for _, a := range sub.artifacts {
		m, ok := in.manifests[a]
		if !ok {
			integrity.Problems = append(integrity.Problems, a+": no published manifest")
			continue
		}
		b, err := in.fetch(a)
		if err != nil {
			integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		if protocol.Digest(b) != a || uint64(len(b)) != m.Size {
			integrity.Problems = append(integrity.Problems, a+": content does not match its manifest")
			continue
		}
		if m.WorkItemID != in.item.id || m.Producer.AgentID != sub.agent {
			integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: produced by %s for %s, not by the submitter for this item", a, m.Producer.AgentID, m.WorkItemID))
		}
		if in.provenance {
			for _, src := range in.item.contract.Inputs {
				if !slices.Contains(m.SourceArtifacts, src.Artifact) {
					integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: provenance lacks input %s (%s)", a, src.Name, src.Artifact))
				}
			}
		}
		if m.MediaType == MediaJSON && !json.Valid(b) {
			integrity.Problems = append(integrity.Problems, a+": declared JSON but does not parse")
		}
		data[m.MediaType] = b
	}
	for _, o := range in.item.contract.RequiredOutputs {
		if _, ok := data[o.MediaType]; !ok {
			integrity.Problems = append(integrity.Problems, "required output "+o.Name+" ("+o.MediaType+") is missing")
		}
	}
	integrity.Passed = len(integrity.Problems) == 0
	rec.Steps = append(rec.Steps, integrity)

	det := ReviewStep{Name: ReviewDeterministic}
	for _, ac := range in.item.contract.AcceptanceCriteria {
		pass := false
		for _, ev := range sub.evidence {
			if slices.Contains(ev.Criteria, ac.ID) && ev.Result == protocol.EvidencePass {
				pass = true
			}
			for _, a := range ev.Artifacts {
				if !slices.Contains(sub.artifacts, a) && !hasInput(in.item.contract, a) {
					det.Problems = append(det.Problems, fmt.Sprintf("evidence for %s cites %s, neither submitted nor an input", ac.ID, a))
				}
			}
		}
		if !pass {
			det.Problems = append(det.Problems, "no passing evidence for "+ac.ID)
		}
	}
	det.Problems = append(det.Problems, stageRules(in, data)...)
	det.Passed = len(det.Problems) == 0
	rec.Steps = append(rec.Steps, det)

	sem := ReviewStep{Name: ReviewSemantic, Problems: semantic(in, data)}
	sem.Passed = len(sem.Problems) == 0
	rec.Steps = append(rec.Steps, sem)
	rec.Accepted = integrity.Passed && det.Passed && sem.Passed
	return rec
}

func hasInput(c protocol.WorkContract, digest string) bool {
	for _, in := range c.Inputs {
		if in.Artifact == digest {
			return true
		}
	}
	return false
}

// inputBytes fetches a named contract input (already hash-checked by fetch).
func (in reviewInput) inputBytes(name string) ([]byte, string, error) {
	for _, i := range in.item.contract.Inputs {
		if i.Name == name {
			b, err := in.fetch(i.Artifact)
			return b, i.Artifact, err
		}
	}
	return nil, "", fmt.Errorf("no %s input", name)
}

// base is the tree the stage's patch applies to.
func (in reviewInput) base() (Tree, error) {
	raw, _, err := in.inputBytes(OutBasePatch)
	if err != nil {
		return in.project, nil
	}
	t, _, err := ApplyPatch(in.project, string(raw))
	return t, err
}

// stageRules are the deterministic business rules of each stage kind.
func stageRules(in reviewInput, data map[string][]byte) []string {
	var p []string
	switch in.stage.Kind {
	case StageRequirements:
		if _, err := FeatureFromNote(data[MediaMarkdown]); err != nil {
			p = append(p, "requirements note: "+err.Error())
		}
	case StageTesting:
		var r TestReport
		if err := json.Unmarshal(data[MediaJSON], &r); err != nil {
			return append(p, "test report: "+err.Error())
		}
		_, patch, _ := in.inputBytes(OutPatch)
		if !r.Applied || !r.Passed || r.Tests == 0 {
			p = append(p, fmt.Sprintf("test report says applied=%v passed=%v packages=%d", r.Applied, r.Passed, r.Tests))
		}
		if r.Patch != patch {
			p = append(p, "the test report is for "+r.Patch+", not the input patch "+patch)
		}
	case StageLoad:
		_, patch, _ := in.inputBytes(OutPatch)
		p = append(p, checkLoad(data[MediaJSON], in.item.id, patch)...)
	case StageIntegration:
		var r Receipt
		if err := json.Unmarshal(data[MediaJSON], &r); err != nil {
			return append(p, "receipt: "+err.Error())
		}
		_, patch, _ := in.inputBytes(OutPatch)
		if r.PatchDigest != patch || r.Commit == "" || r.Key == "" {
			p = append(p, "the receipt does not record the input patch applied under a key")
		}
	}
	return p
}

// semantic is the reviewer's check of each stage's meaning.
func semantic(in reviewInput, data map[string][]byte) []string {
	base, err := in.base()
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
	switch in.stage.Kind {
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
		patch, _, err := in.inputBytes(OutPatch)
		if err != nil {
			return []string{err.Error()}
		}
		var rep *TestReport
		if raw, _, err := in.inputBytes(OutTestReport); err == nil {
			rep = new(TestReport)
			if err := json.Unmarshal(raw, rep); err != nil {
				return []string{"test report: " + err.Error()}
			}
		} else if in.stage.Kind == StageTesting {
			rep = new(TestReport)
			_ = json.Unmarshal(data[MediaJSON], rep)
		}
		r := ReviewDiff(base, string(patch), rep)
		p := findings(r)
		if in.stage.Kind == StageReview {
			for _, c := range r.Files {
				if !bytes.Contains(data[MediaMarkdown], []byte("`"+c.Path+"`")) {
					p = append(p, "the review notes omit "+c.Path)
				}
			}
		}
		return p
	case StageIntegration:
		patch, _, err := in.inputBytes(OutPatch)
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

// reviewEvidence turns a passing review into the accept_result evidence:
// one record per step, in review order.
func reviewEvidence(rec ReviewRecord, c protocol.WorkContract, me string, now time.Time, artifacts []string) []protocol.Evidence {
	ids := protocol.List[string]{}
	for _, ac := range c.AcceptanceCriteria {
		ids = append(ids, ac.ID)
	}
	out := make([]protocol.Evidence, 0, len(rec.Steps))
	for _, s := range rec.Steps {
		r := protocol.EvidencePass
		if !s.Passed {
			r = protocol.EvidenceFail
		}
		out = append(out, protocol.Evidence{Subject: rec.WorkItemID, Criteria: ids, Method: "coordinator review: " + s.Name,
			Result: r, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: me}, Timestamp: protocol.NewTime(now),
			Artifacts: protocol.List[string](append([]string{}, artifacts...))})
	}
	return out
}

// failureEvidence is the work.fail evidence of a rejected review: the
// failure criterion, and the first failed step's problems as the method.
func failureEvidence(rec ReviewRecord, me string, now time.Time, artifacts []string) ([]protocol.Evidence, string) {
	reason := "review failed"
	for _, s := range rec.Steps {
		if !s.Passed {
			reason = s.Name + ": " + strings.Join(s.Problems, "; ")
			break
		}
	}
	if len(reason) > 1000 {
		reason = reason[:1000] + "…"
	}
	ev := protocol.Evidence{Subject: rec.WorkItemID, Criteria: protocol.List[string]{protocol.CriterionFailure}, Method: "coordinator review (spec 13.2 order)",
		Result: protocol.EvidenceFail, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: me}, Timestamp: protocol.NewTime(now),
		Artifacts: protocol.List[string](append([]string{}, artifacts...))}
	return []protocol.Evidence{ev}, reason
}
