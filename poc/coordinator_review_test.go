package poc

import (
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// reviewCase builds the review of an implementation submission whose
// patch is made by edit from the feature's correct implementation.
func reviewCase(t *testing.T, edit func(Tree), tweak func(*reviewInput, map[string][]byte)) ReviewRecord {
	t.Helper()
	st := MissionA(base).WorkStages()[1]
	changed, err := ImplementFeature(TinyProject(), MissionA(base).Feature, nil)
	if err != nil {
		t.Fatal(err)
	}
	edit(changed)
	patch := []byte(UnifiedDiff(TinyProject(), changed))
	d := protocol.Digest(patch)
	note := protocol.Digest([]byte("note"))
	c := st.Contract
	c.Inputs = protocol.List[protocol.InputRef]{{Artifact: note, Name: OutRequirements}}
	store := map[string][]byte{d: patch}
	in := reviewInput{
		item: &itemView{id: st.WorkItemID, contract: c, submission: &submission{seq: 9, agent: "w1", artifacts: []string{d},
			evidence: EvidenceFor(c, st.WorkItemID, agent("w1"), base, map[string]piece{
				EvPatchApplies: {Result: protocol.EvidencePass, Method: "m", Artifacts: []string{d}},
				EvTestsTouched: {Result: protocol.EvidencePass, Method: "m", Artifacts: []string{d}}})}},
		stage: st, project: TinyProject(), provenance: true,
		manifests: map[string]protocol.ArtifactManifest{d: {ContentHash: d, MediaType: MediaDiff, Size: uint64(len(patch)),
			WorkItemID: st.WorkItemID, Producer: protocol.ArtifactProducer{AgentID: "w1"}, SourceArtifacts: protocol.List[string]{note}}},
	}
	if tweak != nil {
		tweak(&in, store)
	}
	in.fetch = func(x string) ([]byte, error) {
		b, ok := store[x]
		if !ok {
			return nil, protocol.Errorf(protocol.CodeInvalidCommand, "no %s", x)
		}
		return b, nil
	}
	return review(in)
}

func TestReviewOrderAndVerdicts(t *testing.T) {
	first := func(in *reviewInput) string { return in.item.submission.artifacts[0] }
	cases := []struct {
		name   string
		edit   func(Tree)
		tweak  func(*reviewInput, map[string][]byte)
		failed string // the step that fails; "" accepted
		detail string
	}{
		{"accepted", func(Tree) {}, nil, "", ""},
		{"no manifest", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) { in.manifests = nil }, ReviewIntegrity, "no published manifest"},
		{"corrupt bytes", func(Tree) {}, func(in *reviewInput, s map[string][]byte) { s[first(in)] = []byte("tampered") }, ReviewIntegrity, "does not match"},
		{"other producer", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) {
			m := in.manifests[first(in)]
			m.Producer.AgentID = "w9"
			in.manifests[first(in)] = m
		}, ReviewIntegrity, "not by the submitter"},
		{"no provenance", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) {
			m := in.manifests[first(in)]
			m.SourceArtifacts = nil
			in.manifests[first(in)] = m
		}, ReviewIntegrity, "provenance lacks input requirements-note"},
		{"output missing", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) {
			m := in.manifests[first(in)]
			m.MediaType = "text/plain"
			in.manifests[first(in)] = m
		}, ReviewIntegrity, "required output patch"},
		{"evidence fails", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) {
			in.item.submission.evidence[1].Result = protocol.EvidenceFail
		}, ReviewDeterministic, "no passing evidence for ac-impl-tests"},
		{"evidence cites a stranger", func(Tree) {}, func(in *reviewInput, _ map[string][]byte) {
			in.item.submission.evidence[0].Artifacts = protocol.List[string]{protocol.Digest([]byte("?"))}
		}, ReviewDeterministic, "neither submitted nor an input"},
		{"todo in the diff", func(t Tree) { t["calc/clamp.go"] += "\n// TODO: negative intervals\n" }, nil, ReviewSemantic, "no-todo"},
		{"no test", func(t Tree) { delete(t, "calc/clamp_test.go") }, nil, ReviewSemantic, "tests-touched"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := reviewCase(t, c.edit, c.tweak)
			var names []string
			for _, s := range rec.Steps {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != ReviewIntegrity+","+ReviewDeterministic+","+ReviewSemantic {
				t.Fatalf("steps %v", names)
			}
			if rec.Accepted != (c.failed == "") {
				t.Fatalf("accepted %v: %+v", rec.Accepted, rec.Steps)
			}
			// Steps before the failing one pass; it fails (later steps may
			// fail too, for want of what it refused).
			for _, s := range rec.Steps {
				if s.Name == c.failed {
					if s.Passed {
						t.Fatalf("step %s passed", s.Name)
					}
					break
				}
				if !s.Passed {
					t.Fatalf("step %s failed before %s: %v", s.Name, c.failed, s.Problems)
				}
			}
			if c.failed == "" {
				ev := reviewEvidence(rec, MissionA(base).WorkStages()[1].Contract, "coord", base, []string{"a"})
				if len(ev) != 3 || ev[0].Method != "coordinator review: "+ReviewIntegrity || ev[2].Result != protocol.EvidencePass {
					t.Fatalf("review evidence %+v", ev)
				}
				return
			}
			ev, reason := failureEvidence(rec, "coord", base, nil)
			if !strings.HasPrefix(reason, c.failed+": ") || !strings.Contains(reason, c.detail) || ev[0].Criteria[0] != protocol.CriterionFailure {
				t.Fatalf("failure reason %q evidence %+v", reason, ev)
			}
		})
	}
}
