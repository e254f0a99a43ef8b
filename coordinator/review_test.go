package coordinator

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

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
			rec, err := review(context.Background(), f.v, p, s, f.io)
			if err != nil {
				t.Fatal(err)
			}
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
			// The stage's one check, lint, is named with its result.
			wantList := map[string]string{StepIntegrity: "", StepChecks: "lint: fail"}[c.failed]
			if c.failed == "" || c.failed == StepSemantic {
				wantList = "lint: pass"
			}
			if got := rec.CheckList(); got != wantList {
				t.Fatalf("checks %q, want %q", got, wantList)
			}
			if c.failed == "" {
				if ev := acceptEvidence(rec, protocol.WorkContract{}, "c1", time.Unix(0, 0), nil); ev[1].Method != "coordinator review: deterministic-checks (lint: pass)" {
					t.Fatalf("the checks step's evidence says %q, want each check by name", ev[1].Method)
				}
			}
			if c.name == "accepted" && (len(ran) != 1 || string(ran[0].Files["notes.md"]) != string(notes)) {
				t.Fatalf("the check ran with %+v, want notes.md holding the output", ran)
			}
		})
	}
}

// An output or input that cannot be read for a transient reason (the
// authority rate limiting, failing internally, unreachable) is no verdict:
// the review returns the error and is made again, where a refusal that
// stands (the artifact is not there) fails the integrity step.
func TestReviewTransientReadIsNoVerdict(t *testing.T) {
	p := parsePlan(t, singlePlan)
	s := p.Stage("draft")
	notes := []byte("# notes\n")
	d := protocol.Digest(notes)
	for _, tc := range []struct {
		name    string
		err     error
		rules   bool // the failure is on a rule's input read
		verdict bool
	}{
		{name: "rate limited", err: protocol.Errorf(protocol.CodeRateLimited, "slow down")},
		{name: "internal error", err: protocol.Errorf(protocol.CodeInternalError, "disk")},
		{name: "unreachable", err: &url.Error{Op: "Get", URL: "https://127.0.0.1:1/mwp/artifacts/x", Err: errors.New("connection refused")}},
		{name: "rule input rate limited", err: protocol.Errorf(protocol.CodeRateLimited, "slow down"), rules: true},
		{name: "not there", err: protocol.Errorf(protocol.CodeInvalidCommand, "no such artifact"), verdict: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := stateView(t, p, protocol.WorkSubmitted)
			v.manifests[[2]string{s.WorkItemID, d}] = protocol.ArtifactManifest{ContentHash: d, MediaType: "text/markdown", Size: uint64(len(notes)),
				WorkItemID: s.WorkItemID, Producer: protocol.ArtifactProducer{AgentID: "w1"}}
			v.item(s.WorkItemID).submission = &submission{seq: 9, agent: "w1", artifacts: []string{d},
				evidence: []protocol.Evidence{{Subject: s.WorkItemID, Criteria: protocol.List[string]{"done"}, Result: protocol.EvidencePass, Artifacts: protocol.List[string]{d}}}}
			io := reviewIO{
				fetch: func(_ context.Context, x string) ([]byte, error) {
					if x == d && !tc.rules {
						return nil, tc.err
					}
					if x == d {
						return notes, nil
					}
					return nil, tc.err
				},
				runCheck: func(context.Context, CheckRun) (CheckResult, error) { return CheckResult{}, nil },
			}
			if tc.rules {
				v.g.Items[s.WorkItemID].Contract.Inputs = protocol.List[protocol.InputRef]{{Artifact: protocol.Digest([]byte("req")), Name: "request"}}
				io.rules = inputRule{}
			}
			rec, err := review(context.Background(), v, p, s, io)
			if tc.verdict {
				if err != nil || rec.Accepted || len(rec.Steps) == 0 {
					t.Fatalf("review %+v, %v: want a failed integrity step", rec, err)
				}
				return
			}
			if err == nil || !errors.Is(err, tc.err) {
				t.Fatalf("review %+v, err %v: want no verdict and %v", rec, err, tc.err)
			}
		})
	}
}

// inputRule reads the item's input "request" in its checks.
type inputRule struct{}

func (inputRule) Checks(_ context.Context, in ReviewInput) []string {
	if _, _, err := in.Input("request"); err != nil {
		return []string{"request unreadable: " + err.Error()}
	}
	return nil
}

func (inputRule) Semantic(context.Context, ReviewInput) []string { return nil }
