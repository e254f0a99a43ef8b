package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// The review of a submission, in the order of spec 13.2: artifact
// integrity and the required outputs; the stage's deterministic checks;
// the semantic step, which is the verdict of the plan's reviewer stage
// over this stage when there is one; then the combined verdict. A step
// that fails ends the review: what follows it would judge outputs already
// rejected.

// The review steps, in order.
const (
	StepIntegrity = "artifact-integrity"
	StepChecks    = "deterministic-checks"
	StepSemantic  = "semantic-review"
)

// Step is one review step's outcome; the deterministic step also names
// each of the stage's checks with its result.
type Step struct {
	Name     string         `json:"name"`
	Passed   bool           `json:"passed"`
	Problems []string       `json:"problems"`
	Checks   []CheckOutcome `json:"checks,omitempty"`
}

// CheckOutcome is one named check of a stage and whether it passed.
type CheckOutcome struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
}

// checkList is "name: pass, name: fail" for the step's named checks.
func (s Step) checkList() string {
	parts := make([]string, 0, len(s.Checks))
	for _, c := range s.Checks {
		r := "pass"
		if !c.Passed {
			r = "fail"
		}
		parts = append(parts, c.Name+": "+r)
	}
	return strings.Join(parts, ", ")
}

// CheckList is the named checks of a review's deterministic step with
// their results ("three-rows: pass, lint: fail"), "" when it ran none.
func (r Review) CheckList() string {
	for _, s := range r.Steps {
		if s.Name == StepChecks {
			return s.checkList()
		}
	}
	return ""
}

// Review is the review of one submission.
type Review struct {
	WorkItemID string `json:"workItemId"`
	Submission uint64 `json:"submission"` // sequence of its work.submitted
	Steps      []Step `json:"steps"`
	Accepted   bool   `json:"accepted"`
	// Waiting is set when integrity and checks passed and the reviewer
	// stage's verdict has not come yet: nothing is decided.
	Waiting bool `json:"waiting,omitempty"`
}

// CheckRun is one deterministic check to run: its argv and the stage's
// outputs as files (name: output name plus the media type's extension)
// in the fresh directory it runs in.
type CheckRun struct {
	Name    string
	Command []string
	Files   map[string][]byte
}

// CheckResult is what a check's command did.
type CheckResult struct {
	ExitCode int
	Stdout   string
}

// semantic is where the semantic step of a stage stands.
type semantic struct {
	reviewer *plan.Stage // nil: no reviewer stage over it
	// deferred: the reviewer cannot run before this stage is verified
	// (a stage between them needs it verified), so its verdict is
	// checked when the reviewer's own submission is reviewed.
	deferred bool
	waiting  bool                // no verdict newer than the submission yet
	verdict  []protocol.Evidence // the reviewer's submitted evidence
}

func semanticState(v *view, p *plan.Plan, s *plan.Stage) semantic {
	var st semantic
	for i := range p.Stages {
		if slices.Contains(p.Stages[i].Reviews, s.ID) {
			st.reviewer = &p.Stages[i]
			break
		}
	}
	if st.reviewer == nil {
		return st
	}
	if needsVerified(p, st.reviewer, s.ID, map[string]bool{}) {
		st.deferred = true
		return st
	}
	sub, rs := v.item(s.WorkItemID).submission, v.item(st.reviewer.WorkItemID).submission
	// A reviewer already verified gives no newer verdict: its last one
	// (on an earlier submission) stands rather than waiting forever.
	done := v.g.Items[st.reviewer.WorkItemID] != nil && v.g.Items[st.reviewer.WorkItemID].State == protocol.WorkVerified
	if sub == nil || rs == nil || (rs.seq < sub.seq && !done) {
		st.waiting = true
		return st
	}
	st.verdict = rs.evidence
	return st
}

// needsVerified reports whether stage from, directly or through the
// stages it depends on, needs stage id verified (or ended) to start.
func needsVerified(p *plan.Plan, from *plan.Stage, id string, seen map[string]bool) bool {
	if seen[from.ID] {
		return false
	}
	seen[from.ID] = true
	for _, d := range from.DependsOn {
		if d.Stage == id && d.Policy != protocol.DependencySubmitted {
			return true
		}
		if next := p.Stage(d.Stage); next != nil && d.Stage != id && needsVerified(p, next, id, seen) {
			return true
		}
	}
	return false
}

// verdictOn reads a reviewer's evidence about stage s: the records whose
// subject is s's WorkItem (or stage id), else all of them; any failing
// record rejects.
func verdictOn(evidence []protocol.Evidence, s *plan.Stage) []string {
	var about []protocol.Evidence
	for _, e := range evidence {
		if e.Subject == s.WorkItemID || e.Subject == s.ID {
			about = append(about, e)
		}
	}
	if len(about) == 0 {
		about = evidence
	}
	var problems []string
	for _, e := range about {
		if e.Result != protocol.EvidencePass {
			problems = append(problems, fmt.Sprintf("the reviewer's %s (%s) is %s", e.Method, strings.Join(e.Criteria, ","), e.Result))
		}
	}
	if len(about) == 0 {
		problems = append(problems, "the reviewer submitted no evidence")
	}
	return problems
}

// reviewIO is the I/O a review needs, injected so the steps stay testable.
type reviewIO struct {
	fetch      func(ctx context.Context, digest string) ([]byte, error)
	runCheck   func(ctx context.Context, run CheckRun) (CheckResult, error)
	rules      Rules // nil: the plan's alone
	provenance bool
}

// review runs the steps over stage s's last submission. An artifact that
// cannot be read for a transient reason (the authority busy or
// unreachable) is no verdict: review returns that error and no Review.
func review(ctx context.Context, v *view, p *plan.Plan, s *plan.Stage, io reviewIO) (Review, error) {
	w, sub := v.g.Items[s.WorkItemID], v.item(s.WorkItemID).submission
	rec := Review{WorkItemID: s.WorkItemID, Submission: sub.seq}
	files, byType := map[string][]byte{}, map[string][]byte{}
	integrity := Step{Name: StepIntegrity}
	for _, a := range sub.artifacts {
		m, ok := v.manifests[[2]string{s.WorkItemID, a}]
		if !ok {
			integrity.Problems = append(integrity.Problems, a+": no manifest published for this item")
			continue
		}
		b, err := io.fetch(ctx, a)
		switch {
		case err != nil && (transient(err) || ctx.Err() != nil):
			return Review{}, fmt.Errorf("coordinator: review of %s: reading %s: %w", s.WorkItemID, a, err)
		case err != nil:
			integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: %v", a, err))
			continue
		case protocol.Digest(b) != a || uint64(len(b)) != m.Size:
			integrity.Problems = append(integrity.Problems, a+": content does not match its manifest")
			continue
		case m.WorkItemID != s.WorkItemID || m.Producer.AgentID != sub.agent:
			integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: produced by %s for %s, not by the submitter for this item", a, m.Producer.AgentID, m.WorkItemID))
			continue
		}
		if io.provenance {
			for _, in := range w.Contract.Inputs {
				if !slices.Contains(m.SourceArtifacts, in.Artifact) {
					integrity.Problems = append(integrity.Problems, fmt.Sprintf("%s: provenance lacks input %s (%s)", a, in.Name, in.Artifact))
				}
			}
		}
		byType[m.MediaType] = b
		if name := outputFile(w.Contract, m.MediaType); name != "" {
			files[name] = b
		}
	}
	for _, o := range w.Contract.RequiredOutputs {
		if _, ok := byType[o.MediaType]; !ok {
			integrity.Problems = append(integrity.Problems, "required output "+o.Name+" ("+o.MediaType+") is missing")
		}
	}
	for _, ac := range w.Contract.AcceptanceCriteria {
		if !slices.ContainsFunc(sub.evidence, func(e protocol.Evidence) bool {
			return slices.Contains(e.Criteria, ac.ID) && e.Result == protocol.EvidencePass
		}) {
			integrity.Problems = append(integrity.Problems, "no passing evidence for criterion "+ac.ID)
		}
	}
	if !rec.add(integrity) {
		return rec, nil
	}
	var unread error // a rule's input read failed for a transient reason
	in := ReviewInput{Stage: s, Contract: w.Contract, Agent: sub.agent, Artifacts: sub.artifacts, Evidence: sub.evidence, Outputs: byType,
		Input: func(name string) ([]byte, string, error) {
			for _, i := range w.Contract.Inputs {
				if i.Name == name {
					b, err := io.fetch(ctx, i.Artifact)
					if err != nil && (transient(err) || ctx.Err() != nil) && unread == nil {
						unread = fmt.Errorf("coordinator: review of %s: reading input %s: %w", s.WorkItemID, name, err)
					}
					return b, i.Artifact, err
				}
			}
			return nil, "", fmt.Errorf("no %s input", name)
		}}
	checks := Step{Name: StepChecks}
	for _, c := range s.Checks {
		res, err := io.runCheck(ctx, CheckRun{Name: c.Name, Command: c.Command, Files: files})
		before := len(checks.Problems)
		switch {
		case err != nil:
			checks.Problems = append(checks.Problems, fmt.Sprintf("check %s: %v", c.Name, err))
		case res.ExitCode != c.Pass.ExitCode:
			checks.Problems = append(checks.Problems, fmt.Sprintf("check %s exited %d, want %d", c.Name, res.ExitCode, c.Pass.ExitCode))
		case c.Pass.StdoutContains != "" && !strings.Contains(res.Stdout, c.Pass.StdoutContains):
			checks.Problems = append(checks.Problems, fmt.Sprintf("check %s: stdout lacks %q", c.Name, c.Pass.StdoutContains))
		}
		checks.Checks = append(checks.Checks, CheckOutcome{Name: c.Name, Passed: len(checks.Problems) == before})
	}
	if io.rules != nil {
		checks.Problems = append(checks.Problems, io.rules.Checks(ctx, in)...)
	}
	if unread != nil {
		return Review{}, unread
	}
	if !rec.add(checks) {
		return rec, nil
	}
	sem := Step{Name: StepSemantic}
	switch st := semanticState(v, p, s); {
	case st.waiting:
		rec.Waiting = true
		return rec, nil
	case st.reviewer != nil && !st.deferred:
		sem.Problems = verdictOn(st.verdict, s)
	}
	// A reviewer's own submission is its verdict: it passes only when it
	// passes every stage it reviews.
	for _, id := range s.Reviews {
		if rs := p.Stage(id); rs != nil {
			for _, pr := range verdictOn(sub.evidence, rs) {
				sem.Problems = append(sem.Problems, id+": "+pr)
			}
		}
	}
	if io.rules != nil {
		sem.Problems = append(sem.Problems, io.rules.Semantic(ctx, in)...)
	}
	if unread != nil {
		return Review{}, unread
	}
	rec.Accepted = rec.add(sem)
	return rec, nil
}

func (r *Review) add(s Step) bool {
	s.Passed = len(s.Problems) == 0
	r.Steps = append(r.Steps, s)
	return s.Passed
}

// outputFile is the file name a check sees an output under.
func outputFile(c protocol.WorkContract, mediaType string) string {
	for _, o := range c.RequiredOutputs {
		if o.MediaType == mediaType {
			return o.Name + extension(mediaType)
		}
	}
	return ""
}

func extension(mediaType string) string {
	switch mediaType {
	case "application/json":
		return ".json"
	case "text/markdown":
		return ".md"
	case "text/plain":
		return ".txt"
	case "text/x-diff", "text/x-patch":
		return ".diff"
	case "application/yaml":
		return ".yaml"
	}
	return ""
}

// acceptEvidence is the work.accept_result evidence of a passing review:
// one record per step, in review order.
func acceptEvidence(rec Review, c protocol.WorkContract, me string, now time.Time, artifacts []string) []protocol.Evidence {
	ids := protocol.List[string]{}
	for _, ac := range c.AcceptanceCriteria {
		ids = append(ids, ac.ID)
	}
	out := make([]protocol.Evidence, 0, len(rec.Steps))
	for _, s := range rec.Steps {
		method := "coordinator review: " + s.Name
		switch {
		case s.Name != StepChecks || len(s.Problems) > 0:
		case len(s.Checks) > 0:
			method += " (" + s.checkList() + ")" // each check by name
		default:
			method += " (all checks passed)"
		}
		out = append(out, protocol.Evidence{Subject: rec.WorkItemID, Criteria: ids, Method: method, Result: protocol.EvidencePass,
			Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: me}, Timestamp: protocol.NewTime(now), Artifacts: protocol.List[string](slices.Clone(artifacts))})
	}
	return out
}

// failEvidence is the work.fail evidence and reason of a rejected review:
// the failed step and its problems.
func failEvidence(rec Review, me string, now time.Time, artifacts []string) ([]protocol.Evidence, string) {
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
		Artifacts: protocol.List[string](slices.Clone(artifacts))}
	return []protocol.Evidence{ev}, reason
}
