package coordinator

import (
	"context"
	"slices"

	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// What a program that embeds the coordinator adds to a plan: review rules
// written in Go, artifacts the coordinator itself makes and publishes
// (a request the first stage reads), and the stages that answer a change
// request. Each is optional; a plan file alone needs none of them.

// Rules are review rules written in Go, run on top of the plan's: Checks
// after the stage's check commands (deterministic business rules), and
// Semantic beside the reviewer stage's verdict. Each returns the problems
// it finds; none passes.
type Rules interface {
	Checks(ctx context.Context, in ReviewInput) []string
	Semantic(ctx context.Context, in ReviewInput) []string
}

// ReviewInput is what a rule reads of one submission whose integrity
// passed.
type ReviewInput struct {
	Stage *plan.Stage
	// Contract is the WorkItem's current contract: the one offered, with
	// its dependencies' outputs among its inputs.
	Contract  protocol.WorkContract
	Agent     string // who submitted
	Artifacts []string
	Evidence  []protocol.Evidence
	// Outputs are the submitted artifacts' bytes (checked against their
	// manifests) by media type.
	Outputs map[string][]byte
	// Input returns the bytes (hash checked) and digest of the contract
	// input named name.
	Input func(name string) ([]byte, string, error)
}

// Input is an artifact the coordinator makes: before a stage whose plan
// inputs name its digest is offered, the coordinator stores the bytes and
// publishes them under that stage's WorkItem with its own manifest.
type Input struct {
	MediaType string
	Data      []byte
}

// ChangeRequest is a mission.changes_requested as the coordinator
// publishes it for the stages that answer it (canonical JSON, media type
// application/json).
type ChangeRequest struct {
	Changes []string `json:"changes"`
	Comment string   `json:"comment,omitempty"`
}

// Bytes is the change request's artifact.
func (cr ChangeRequest) Bytes() []byte {
	raw, err := protocol.Marshal(cr)
	if err != nil {
		panic(err) // strings only
	}
	return raw
}

// Output is one accepted output of a stage.
type Output struct {
	Artifact  string
	MediaType string
}

// Rework returns the stages that answer the round-th (from 1) change
// request, whose artifact has digest request; accepted gives a WorkItem's
// accepted outputs (nil while it is not verified). It returns nil while
// it cannot say yet (it needs an output of the previous round). The
// stages' ids are new; their dependencies name stages of the plan or of
// earlier rounds. Without Rework a change request is answered by
// submitting the Mission for approval again.
type Rework func(round int, request string, accepted func(workItemID string) []Output) []plan.Stage

// effective is the plan the coordinator follows at v: the plan's stages
// and, for each change request in the log, the stages rework names for
// it. complete is false while a round's stages are still unknown: the
// Mission is not submitted again before they are done.
func effective(v *view, p *plan.Plan, rework Rework) (*plan.Plan, bool) {
	if rework == nil || len(v.changes) == 0 {
		return p, true
	}
	out := *p
	out.Stages = slices.Clone(p.Stages)
	accepted := func(id string) []Output {
		l := v.items[id]
		if l == nil || l.accepted == nil {
			return nil
		}
		var outs []Output
		for _, a := range l.accepted.artifacts {
			outs = append(outs, Output{Artifact: a, MediaType: v.manifests[[2]string{id, a}].MediaType})
		}
		return outs
	}
	for i, cr := range v.changes {
		more := rework(i+1, protocol.Digest(cr.Bytes()), accepted)
		if more == nil {
			return &out, false
		}
		out.Stages = append(out.Stages, more...)
	}
	return &out, true
}

// inputsReady reports whether every coordinator-made input of stage s is
// published in the Group.
func inputsReady(v *view, s *plan.Stage, pol policy) bool {
	for _, in := range s.Inputs {
		if _, mine := pol.input(v, in.Artifact); mine && !v.published[in.Artifact] {
			return false
		}
	}
	return true
}

// input is a coordinator-made input by digest: one of Config.Inputs or a
// change request in the log.
func (pol policy) input(v *view, digest string) (Input, bool) {
	if in, ok := pol.inputs[digest]; ok {
		return in, true
	}
	if data, ok := v.requests[digest]; ok {
		return Input{MediaType: "application/json", Data: data}, true
	}
	return Input{}, false
}
