package poc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// Evidence kinds: the evidenceRequired names of the mission contracts. A
// handler records one piece of evidence per kind it checked; the Evidence
// for an acceptance criterion passes only when every kind it requires was
// checked and passed.
const (
	EvRequirementsNote   = "requirements-note"
	EvTestCases          = "test-cases"
	EvPatchApplies       = "patch-applies"
	EvTestsTouched       = "tests-touched"
	EvTestReport         = "test-report"
	EvReviewNotes        = "review-notes"
	EvReviewFindings     = "review-findings"
	EvIntegrationReceipt = "integration-receipt"
	EvIdempotencyKey     = "idempotency-key"
	EvLoadChain          = "load-chain"
)

// ArtifactSource returns stored artifact bytes by content hash
// (*authoritylite.Service is one). Handlers check the hash again: a
// retrieved artifact is verified, never trusted (spec 13.1).
type ArtifactSource interface {
	Artifact(digest string) ([]byte, error)
}

// HandlerConfig is what the mission handlers need besides their Work
// handle. One config serves one worker agent.
type HandlerConfig struct {
	AgentID   string
	Artifacts ArtifactSource
	// Integration is the integration repository's service; only the
	// integration handler uses it.
	Integration *EffectLog
	// GoBin is the go command the testing handler runs; "" is FindGo.
	GoBin string
	// Project is the baseline project; nil is TinyProject().
	Project Tree
	Clock   clock.Clock
	// Holds are the driver's hold points (nil: none); see Holds.
	Holds *Holds
	// Python, when set, runs the stages of Python.Kinds as Python external
	// handlers instead of their Go twins.
	Python *PythonStages
}

// Handlers returns the mission handlers sharing cfg.
func Handlers(cfg HandlerConfig) []slots.Handler {
	c := &cfg
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Project == nil {
		c.Project = TinyProject()
	}
	twins := map[StageKind]slots.Handler{
		StageRequirements: &RequirementsHandler{c}, StageImplementation: &ImplementationHandler{c}, StageTesting: &TestingHandler{c},
		StageReview: &ReviewHandler{c}, StageIntegration: &IntegrationHandler{c}, StageLoad: &LoadHandler{cfg: c}, StageSoak: &LoadHandler{cfg: c, soak: true},
	}
	var hs []slots.Handler
	if c.Python != nil {
		hs = c.Python.handlers(c)
		for k := range c.Python.Kinds() {
			delete(twins, k)
		}
	}
	for _, k := range []StageKind{StageRequirements, StageImplementation, StageTesting, StageReview, StageIntegration, StageLoad, StageSoak} {
		if h := twins[k]; h != nil {
			hs = append(hs, h)
		}
	}
	return hs
}

// FindGo returns the go command: GOROOT/bin/go of this toolchain when it
// exists, else the first go on PATH.
func FindGo() (string, error) {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p, nil
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("poc: no go command: %w", err)
	}
	return p, nil
}

// piece is one checked evidence kind.
type piece struct {
	Result    protocol.EvidenceResult `json:"result"`
	Method    string                  `json:"method"`
	Artifacts []string                `json:"artifacts"`
	Detail    string                  `json:"detail,omitempty"`
}

// jobState is a handler's checkpoint: the steps done and what they
// produced. The workspace is not in it: a resumed run rebuilds it from
// the inputs (setup steps always run).
type jobState struct {
	Done     int               `json:"done"`
	Vals     map[string]string `json:"vals"`
	Evidence map[string]piece  `json:"evidence"`
	Outputs  []string          `json:"outputs"`
	// Media is each output's media type, so a later run (another lease
	// after a restart or reassignment) can publish it again.
	Media map[string]string `json:"media,omitempty"`
}

// job is one run of a handler.
type job struct {
	w     *slots.Work
	cfg   *HandlerConfig
	c     protocol.WorkContract
	st    jobState
	dir   string // the project copy in the workdir, when a step made one
	scr   map[string]any
	start time.Time
	// published are the outputs this run published under its own lease.
	published map[string]bool
}

// step is one unit of a handler between safe points. A setup step
// rebuilds in-memory or workspace state and runs again on resume; any
// other step runs once per WorkItem, its results kept in the checkpoint.
type step struct {
	name  string
	setup bool
	fn    func(ctx context.Context, j *job) error
}

// runSteps runs steps with structured progress before each and a
// checkpoint after each; at every checkpoint it yields when preemption was
// requested. The result carries the published outputs and one Evidence
// per acceptance criterion.
func (cfg *HandlerConfig) runSteps(ctx context.Context, w *slots.Work, steps []step) (slots.Result, error) {
	j := &job{w: w, cfg: cfg, c: w.Contract(), scr: map[string]any{}, start: cfg.Clock.Now(),
		st: jobState{Vals: map[string]string{}, Evidence: map[string]piece{}}}
	if raw, ok := w.Resume(); ok {
		if err := json.Unmarshal(raw, &j.st); err != nil {
			return slots.Result{}, slots.Permanent(fmt.Errorf("poc: checkpoint state: %w", err))
		}
		if j.st.Vals == nil {
			j.st.Vals = map[string]string{}
		}
		if j.st.Evidence == nil {
			j.st.Evidence = map[string]piece{}
		}
	}
	for i, s := range steps {
		if i < j.st.Done && !s.setup {
			continue
		}
		if err := j.progress(ctx, steps, i); err != nil {
			return slots.Result{}, err
		}
		if i == 0 {
			cfg.Holds.wait(ctx, cfg.AgentID, w, HoldAtStart)
		}
		// Between steps is a safe point once a checkpoint exists (this
		// run's or the one it resumed from): yield before new work.
		if j.st.Done > 0 && i >= j.st.Done {
			cfg.Holds.wait(ctx, cfg.AgentID, w, HoldAtSafePoint)
			if preempted(w) {
				// Asked to yield here: the checkpoint the run yields with is
				// taken at this safe point, after the request, so the log
				// shows when the run really stopped.
				if err := j.checkpoint(ctx, steps[j.st.Done-1].name); err != nil {
					return slots.Result{}, err
				}
				return slots.Result{}, slots.ErrPreempted
			}
		}
		if err := s.fn(ctx, j); err != nil {
			return slots.Result{}, fmt.Errorf("%s: %w", s.name, err)
		}
		if i < j.st.Done {
			continue // a setup step redone on resume: nothing new to save
		}
		j.st.Done = i + 1
		if err := j.checkpoint(ctx, s.name); err != nil {
			return slots.Result{}, err
		}
		if preempted(w) {
			return slots.Result{}, slots.ErrPreempted
		}
	}
	// Outputs published by an earlier run went out under that run's lease,
	// which may have been lost before the authority saw them: publish them
	// again under this one before they are submitted.
	for _, d := range j.st.Outputs {
		if j.published[d] || j.cfg.Artifacts == nil {
			continue
		}
		data, err := FetchVerified(j.cfg.Artifacts, d)
		if err != nil {
			return slots.Result{}, fmt.Errorf("republish %s: %w", d, err)
		}
		if _, err := j.w.PublishArtifact(ctx, j.st.Media[d], data); err != nil {
			return slots.Result{}, err
		}
	}
	p := j.report(steps, len(steps), "submit")
	return slots.Result{Artifacts: append([]string(nil), j.st.Outputs...), Evidence: j.evidence(), Progress: &p}, nil
}

// checkpoint saves the job's state durably at a safe point.
func (j *job) checkpoint(ctx context.Context, phase string) error {
	state, err := json.Marshal(j.st)
	if err != nil {
		return err
	}
	_, err = j.w.Checkpoint(ctx, state, checkpoint.Meta{Phase: phase})
	return err
}

func preempted(w *slots.Work) bool {
	select {
	case <-w.PreemptRequested():
		return true
	default:
		return false
	}
}

func (j *job) progress(ctx context.Context, steps []step, i int) error {
	return j.w.Progress(ctx, j.report(steps, i, steps[i].name))
}

func (j *job) report(steps []step, i int, phase string) protocol.Progress {
	done := protocol.List[string]{}
	for k := 0; k < i && k < len(steps); k++ {
		done = append(done, steps[k].name)
	}
	next := "submit"
	if i < len(steps) {
		next = "after " + steps[i].name
	}
	left := time.Duration(len(steps)-i) * 2 * time.Second
	refs := protocol.List[string](append([]string(nil), j.st.Outputs...))
	return protocol.Progress{Phase: phase, MilestonesCompleted: done, NextCheckpoint: next, Blockers: protocol.List[string]{},
		RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(j.cfg.Clock.Now().Add(left)), Confidence: 0.8},
		EvidenceRefs:    refs}
}

// record notes one checked evidence kind.
func (j *job) record(kind string, ok bool, method, detail string, artifacts ...string) {
	r := protocol.EvidenceFail
	if ok {
		r = protocol.EvidencePass
	}
	j.st.Evidence[kind] = piece{Result: r, Method: method, Artifacts: append([]string{}, artifacts...), Detail: detail}
}

// publish stores an output and remembers its digest under name.
func (j *job) publish(ctx context.Context, name, mediaType string, data []byte) (string, error) {
	d, err := j.w.PublishArtifact(ctx, mediaType, data)
	if err != nil {
		return "", err
	}
	j.st.Vals[name] = d
	j.st.Outputs = append(j.st.Outputs, d)
	if j.st.Media == nil {
		j.st.Media = map[string]string{}
	}
	j.st.Media[d] = mediaType
	if j.published == nil {
		j.published = map[string]bool{}
	}
	j.published[d] = true
	return d, nil
}

// evidence maps the recorded pieces to the contract's criteria: one
// Evidence per criterion, passing when every kind it requires passed.
func (j *job) evidence() []protocol.Evidence {
	return EvidenceFor(j.c, j.w.Slot().WorkItemID, protocol.Actor{Kind: protocol.ActorAgent, ID: j.cfg.AgentID}, j.cfg.Clock.Now(), j.st.Evidence)
}

// EvidenceFor builds one Evidence per acceptance criterion of c from
// checked pieces by evidence kind. A required kind that was not checked
// makes the criterion inconclusive.
func EvidenceFor(c protocol.WorkContract, subject string, producer protocol.Actor, now time.Time, pieces map[string]piece) []protocol.Evidence {
	out := make([]protocol.Evidence, 0, len(c.AcceptanceCriteria))
	for _, ac := range c.AcceptanceCriteria {
		result := protocol.EvidencePass
		var methods []string
		arts := map[string]bool{}
		for _, kind := range ac.EvidenceRequired {
			p, ok := pieces[kind]
			switch {
			case !ok:
				result = protocol.EvidenceInconclusive
				methods = append(methods, kind+": not checked")
				continue
			case p.Result != protocol.EvidencePass && result == protocol.EvidencePass:
				result = p.Result
			}
			m := kind + ": " + p.Method
			if p.Detail != "" {
				m += " (" + p.Detail + ")"
			}
			methods = append(methods, m)
			for _, a := range p.Artifacts {
				arts[a] = true
			}
		}
		list := protocol.List[string]{}
		for a := range arts {
			list = append(list, a)
		}
		sort.Strings(list)
		method := "none"
		if len(methods) > 0 {
			method = methods[0]
			for _, m := range methods[1:] {
				method += "; " + m
			}
		}
		out = append(out, protocol.Evidence{Subject: subject, Criteria: protocol.List[string]{ac.ID}, Method: method,
			Result: result, Producer: producer, Timestamp: protocol.NewTime(now), Artifacts: list})
	}
	return out
}

// errNoInput is a contract without a required input: no retry helps.
var errNoInput = errors.New("poc: missing input")

// input returns the verified bytes of the contract input called name.
func (j *job) input(name string) ([]byte, string, error) {
	for _, in := range j.c.Inputs {
		if in.Name != name {
			continue
		}
		data, err := FetchVerified(j.cfg.Artifacts, in.Artifact)
		return data, in.Artifact, err
	}
	return nil, "", slots.Permanent(fmt.Errorf("%w: the contract has no %q input", errNoInput, name))
}

// hasInput reports whether the contract names an input called name.
func (j *job) hasInput(name string) bool {
	for _, in := range j.c.Inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

// FetchVerified returns an artifact's bytes after checking they hash to
// digest.
func FetchVerified(src ArtifactSource, digest string) ([]byte, error) {
	if src == nil {
		return nil, slots.Permanent(errors.New("poc: no artifact source"))
	}
	data, err := src.Artifact(digest)
	if err != nil {
		return nil, fmt.Errorf("poc: artifact %s: %w", digest, err)
	}
	if got := protocol.Digest(data); got != digest {
		return nil, slots.Permanent(fmt.Errorf("poc: artifact %s hashes to %s", digest, got))
	}
	return data, nil
}

// workspace writes tree into the run's private directory.
func (j *job) workspace(t Tree) error {
	j.dir = filepath.Join(j.w.Workdir(), "project")
	if err := os.RemoveAll(j.dir); err != nil {
		return err
	}
	return t.WriteTo(j.dir)
}

func capability(id string) protocol.Capability {
	return protocol.Capability{ID: id, Version: HandlerVersion}
}
