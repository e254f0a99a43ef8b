package poc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// RequirementsHandler turns a feature request into a requirements note.
type RequirementsHandler struct{ cfg *HandlerConfig }

// ImplementationHandler writes the feature's code and test as a unified
// diff against the baseline project.
type ImplementationHandler struct{ cfg *HandlerConfig }

// TestingHandler applies the patch in a scratch copy of the project and
// runs `go test ./...`, publishing a test report.
type TestingHandler struct{ cfg *HandlerConfig }

// ReviewHandler reviews the diff against its test report.
type ReviewHandler struct{ cfg *HandlerConfig }

// IntegrationHandler applies the reviewed patch to the integration
// repository through Work.ToolCall, under its idempotency key.
type IntegrationHandler struct{ cfg *HandlerConfig }

func (h *RequirementsHandler) Capability() protocol.Capability   { return capability(CapRequirements) }
func (h *ImplementationHandler) Capability() protocol.Capability { return capability(CapImplement) }
func (h *TestingHandler) Capability() protocol.Capability        { return capability(CapTest) }
func (h *ReviewHandler) Capability() protocol.Capability         { return capability(CapReview) }
func (h *IntegrationHandler) Capability() protocol.Capability    { return capability(CapIntegrate) }

// Run implements slots.Handler.
func (h *RequirementsHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	return h.cfg.runSteps(ctx, w, []step{
		{name: "read feature request", setup: true, fn: func(_ context.Context, j *job) error {
			raw, d, err := j.input(OutFeatureRequest)
			if err != nil {
				return err
			}
			f, err := DecodeFeature(raw)
			if err != nil {
				return slots.Permanent(err)
			}
			j.scr["feature"], j.scr["source"] = f, d
			return nil
		}},
		{name: "write requirements note", fn: func(ctx context.Context, j *job) error {
			f := j.scr["feature"].(Feature)
			note, err := RequirementsNote(f, j.scr["source"].(string))
			if err != nil {
				return err
			}
			d, err := j.publish(ctx, OutRequirements, MediaMarkdown, note)
			if err != nil {
				return err
			}
			j.record(EvRequirementsNote, true, "requirements note written from the validated feature request", "", d)
			j.record(EvTestCases, len(f.Cases) > 0, "acceptance cases listed", fmt.Sprintf("%d cases", len(f.Cases)), d)
			return nil
		}},
	})
}

// feature reads the feature spec from the requirements note, or from the
// feature request when the mission has no requirements stage.
func (j *job) feature() (Feature, error) {
	if j.hasInput(OutRequirements) {
		raw, _, err := j.input(OutRequirements)
		if err != nil {
			return Feature{}, err
		}
		f, err := FeatureFromNote(raw)
		return f, slots.Permanent(err)
	}
	raw, _, err := j.input(OutFeatureRequest)
	if err != nil {
		return Feature{}, err
	}
	f, err := DecodeFeature(raw)
	return f, slots.Permanent(err)
}

// base is the tree a patch applies to: the baseline project, with the
// already verified base-patch applied when the contract names one.
func (j *job) base() (Tree, error) {
	if !j.hasInput(OutBasePatch) {
		return j.cfg.Project, nil
	}
	raw, _, err := j.input(OutBasePatch)
	if err != nil {
		return nil, err
	}
	t, _, err := ApplyPatch(j.cfg.Project, string(raw))
	if err != nil {
		return nil, slots.Permanent(fmt.Errorf("base-patch: %w", err))
	}
	return t, nil
}

// ChangeRequest is the human's requested changes, passed to rework stages.
type ChangeRequest struct {
	Changes []string `json:"changes"`
	Comment string   `json:"comment,omitempty"`
}

// Run implements slots.Handler.
func (h *ImplementationHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	return h.cfg.runSteps(ctx, w, []step{
		{name: "read requirements", setup: true, fn: func(_ context.Context, j *job) error {
			f, err := j.feature()
			if err != nil {
				return err
			}
			var changes []string
			if j.hasInput(OutChangeRequest) {
				raw, _, err := j.input(OutChangeRequest)
				if err != nil {
					return err
				}
				var cr ChangeRequest
				if err := json.Unmarshal(raw, &cr); err != nil {
					return slots.Permanent(fmt.Errorf("change request: %w", err))
				}
				changes = cr.Changes
			}
			j.scr["feature"], j.scr["changes"] = f, changes
			return nil
		}},
		{name: "write code and test", fn: func(ctx context.Context, j *job) error {
			f := j.scr["feature"].(Feature)
			base, err := j.base()
			if err != nil {
				return err
			}
			changed, err := ImplementFeature(base, f, j.scr["changes"].([]string))
			if err != nil {
				return slots.Permanent(err)
			}
			patch := UnifiedDiff(base, changed)
			_, files, err := ApplyPatch(base, patch)
			applies := err == nil
			goChanged, tests := false, false
			for _, c := range files {
				goChanged = goChanged || strings.HasSuffix(c.Path, ".go")
				tests = tests || strings.HasSuffix(c.Path, "_test.go")
			}
			d, err := j.publish(ctx, OutPatch, MediaDiff, []byte(patch))
			if err != nil {
				return err
			}
			j.record(EvPatchApplies, applies, "patch applied to a fresh copy of the baseline", fmt.Sprintf("%d files", len(files)), d)
			j.record(EvTestsTouched, tests || !goChanged, "patch lists a _test.go file when it changes Go code", "", d)
			return nil
		}},
	})
}

// Run implements slots.Handler.
func (h *TestingHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	return h.cfg.runSteps(ctx, w, []step{
		{name: "prepare workspace", setup: true, fn: func(_ context.Context, j *job) error {
			raw, d, err := j.input(OutPatch)
			if err != nil {
				return err
			}
			j.scr["patch"] = d
			base, err := j.base()
			if err != nil {
				return err
			}
			tree, _, perr := ApplyPatch(base, string(raw))
			j.scr["applyErr"] = perr
			if perr != nil {
				tree = base
			}
			return j.workspace(tree)
		}},
		{name: "go test", fn: func(ctx context.Context, j *job) error {
			rep := TestReport{Patch: j.scr["patch"].(string), Command: "go test -count=1 ./..."}
			if perr, _ := j.scr["applyErr"].(error); perr != nil {
				rep.Output, rep.ExitCode = "patch does not apply: "+perr.Error(), -1
			} else {
				op := slots.Op{ID: "go-test:" + rep.Patch, Tool: "go", Operation: "exec", Risk: slots.Risk{Class: protocol.RiskLow}}
				out, err := j.w.ToolCall(ctx, op, func(ctx context.Context, _ string) ([]byte, error) {
					r, err := RunGoTest(ctx, j.cfg.GoBin, j.dir)
					if err != nil {
						return nil, err
					}
					return json.Marshal(r)
				})
				if err != nil {
					return err
				}
				var r TestReport
				if err := json.Unmarshal(out, &r); err != nil {
					return err
				}
				rep.Applied, rep.Passed, rep.ExitCode, rep.Tests, rep.Output = true, r.Passed, r.ExitCode, r.Tests, r.Output
			}
			raw, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			d, err := j.publish(ctx, OutTestReport, MediaJSON, raw)
			if err != nil {
				return err
			}
			detail := "fail"
			if rep.Passed {
				detail = "pass"
			}
			j.record(EvTestReport, rep.Passed, rep.Command+" on the patched project", detail, d, rep.Patch)
			return nil
		}},
	})
}

// maxOutput bounds the go test output kept in a report.
const maxOutput = 8 << 10

// RunGoTest runs `go test -count=1 ./...` in dir and reports the outcome;
// a failing test is a report, not an error. The environment pins the local
// toolchain and no workspace, so the scratch module builds on its own.
func RunGoTest(ctx context.Context, goBin, dir string) (TestReport, error) {
	if goBin == "" {
		var err error
		if goBin, err = FindGo(); err != nil {
			return TestReport{}, err
		}
	}
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	rep := TestReport{Command: "go test -count=1 ./...", Output: out.String()}
	if len(rep.Output) > maxOutput {
		rep.Output = "…" + rep.Output[len(rep.Output)-maxOutput:]
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "ok\t") {
			rep.Tests++
		}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		rep.Passed = rep.Tests > 0
	case errors.As(err, &ee):
		rep.ExitCode = ee.ExitCode()
	default:
		return TestReport{}, fmt.Errorf("poc: run %s: %w", goBin, err)
	}
	return rep, ctx.Err()
}

// Run implements slots.Handler.
func (h *ReviewHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	return h.cfg.runSteps(ctx, w, []step{
		{name: "read diff and test report", setup: true, fn: func(_ context.Context, j *job) error {
			patch, pd, err := j.input(OutPatch)
			if err != nil {
				return err
			}
			raw, rd, err := j.input(OutTestReport)
			if err != nil {
				return err
			}
			var rep TestReport
			if err := json.Unmarshal(raw, &rep); err != nil {
				return slots.Permanent(fmt.Errorf("test report: %w", err))
			}
			j.scr["patch"], j.scr["patchDigest"], j.scr["report"], j.scr["reportDigest"] = string(patch), pd, rep, rd
			return nil
		}},
		{name: "review", fn: func(ctx context.Context, j *job) error {
			rep := j.scr["report"].(TestReport)
			pd, rd := j.scr["patchDigest"].(string), j.scr["reportDigest"].(string)
			if rep.Patch != pd {
				return slots.Permanent(fmt.Errorf("the test report is for %s, not the patch under review %s", rep.Patch, pd))
			}
			base, err := j.base()
			if err != nil {
				return err
			}
			r := ReviewDiff(base, j.scr["patch"].(string), &rep)
			notes := ReviewNotes(r, pd, rd)
			d, err := j.publish(ctx, OutReviewNotes, MediaMarkdown, notes)
			if err != nil {
				return err
			}
			j.record(EvReviewNotes, len(r.Files) > 0, "notes list every changed file", fmt.Sprintf("%d files", len(r.Files)), d, pd)
			j.record(EvReviewFindings, !r.Blocking(), "rule-based review of the diff", fmt.Sprintf("%d findings", len(r.Findings)), d, pd, rd)
			return nil
		}},
	})
}

// Receipt is the integration stage's output.
type Receipt struct {
	Key         string   `json:"key"` // the idempotency key the effect is recorded under
	EffectSeq   uint64   `json:"effectSeq"`
	PatchDigest string   `json:"patchDigest"`
	Commit      string   `json:"commit"`
	Files       []string `json:"files"`
	Repeat      bool     `json:"repeat"` // answered with an earlier effect
}

// Run implements slots.Handler.
func (h *IntegrationHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	return h.cfg.runSteps(ctx, w, []step{
		{name: "read reviewed patch", setup: true, fn: func(_ context.Context, j *job) error {
			patch, d, err := j.input(OutPatch)
			j.scr["patch"], j.scr["patchDigest"] = string(patch), d
			return err
		}},
		{name: "apply to integration repository", fn: func(ctx context.Context, j *job) error {
			if j.cfg.Integration == nil {
				return slots.Permanent(errors.New("poc: no integration repository configured"))
			}
			pd := j.scr["patchDigest"].(string)
			op := slots.Op{ID: "integrate:" + pd, Tool: IntegrationTool, Operation: IntegrationOperation,
				Risk: slots.Risk{Class: protocol.RiskMedium, ExternallyVisible: true}, SideEffect: true}
			var used string
			out, err := j.w.ToolCall(ctx, op, func(_ context.Context, key string) ([]byte, error) {
				used = key
				eff, repeat, err := j.cfg.Integration.Apply(key, pd, j.scr["patch"].(string))
				if errors.Is(err, ErrConflict) {
					return nil, slots.Permanent(err)
				}
				if err != nil {
					return nil, err
				}
				return json.Marshal(Receipt{Key: eff.Key, EffectSeq: eff.Seq, PatchDigest: pd, Commit: eff.Commit, Files: eff.Files, Repeat: repeat})
			})
			if err != nil {
				return err
			}
			var rc Receipt
			if err := json.Unmarshal(out, &rc); err != nil {
				return err
			}
			raw, err := json.MarshalIndent(rc, "", "  ")
			if err != nil {
				return err
			}
			d, err := j.publish(ctx, OutReceipt, MediaJSON, raw)
			if err != nil {
				return err
			}
			j.record(EvIntegrationReceipt, rc.PatchDigest == pd && rc.Commit != "", "integration repository receipt", "effect "+fmt.Sprint(rc.EffectSeq), d, pd)
			// The ledger may answer a repeat without calling fn: then the
			// first call's key is the one in the receipt.
			j.record(EvIdempotencyKey, rc.Key != "" && (used == "" || used == rc.Key || rc.Repeat), "effect recorded under the tool key", rc.Key, d)
			return nil
		}},
	})
}
