package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Plan is a parsed, valid plan file.
type Plan struct {
	Name     string
	Mission  Mission
	Approval Approval
	// Stages in a topological order: every stage after the stages it
	// depends on; among stages free to go, the file's order.
	Stages []Stage
	// Inputs are the inputs named without a digest, in the order the file
	// first names them; InputFiles and Bind give them theirs.
	Inputs []Input
}

// Mission is the plan's Mission, as mission.create carries it.
type Mission struct {
	ID, GroupID, Title, Objective string
	PriorityClass                 protocol.PriorityClass // default normal
	Budgets                       *protocol.Budgets      // nil: no Mission-wide caps
	Deadline                      Deadline               // zero: none
}

// Approval is the Mission's final human approval (spec 13.2, last step):
// the humans who approve it, by id, and what they are asked to look at.
type Approval struct {
	Approvers    []string
	Instructions string
}

// Deadline is a duration from the Mission's start or an absolute time; the
// zero value is no deadline.
type Deadline struct {
	After time.Duration // > 0 when relative
	At    protocol.Time // set when absolute
}

// IsZero reports whether d is no deadline.
func (d Deadline) IsZero() bool { return d.After == 0 && d.At.IsZero() }

// From resolves d for a Mission started at start.
func (d Deadline) From(start time.Time) protocol.Time {
	if d.After > 0 {
		return protocol.NewTime(start.Add(d.After))
	}
	return d.At
}

func (d Deadline) String() string {
	if d.After > 0 {
		return d.After.String()
	}
	if d.At.IsZero() {
		return ""
	}
	return d.At.String()
}

// Stage is one node of the plan: it becomes one WorkItem.
type Stage struct {
	ID string
	// WorkItemID is MissionID + ":" + ID (stage ids hold no ':', so the
	// last ':' splits it back); ContractID is WorkItemID + ":contract".
	WorkItemID, ContractID string
	Goal                   string
	Capability             protocol.Capability
	Acceptance             []protocol.AcceptanceCriterion
	Outputs                []protocol.OutputSpec
	Inputs                 []protocol.InputRef
	// DependsOn holds the stage's declared dependencies and, for a
	// reviewer, an implied "submitted" one on each stage it reviews that
	// it does not declare; in file order, declared first.
	DependsOn         []Dependency
	Reviews           []string // stage ids whose outputs this stage reviews
	AllowedTools      []string
	AllowedData       []string
	AllowedOperations []string
	Resources         protocol.ResourceLimits
	Budgets           protocol.Budgets
	Deadline          Deadline // the stage's, or the Mission's when it has none
	Urgency           protocol.Urgency
	BusinessImpact    protocol.BusinessImpact
	Risk              protocol.Risk
	Retry             protocol.RetryPolicy
	Checks            []Check
	Notes             string
	Line              int // where the stage starts in the file
}

// Dependency is an edge to another stage of the plan.
type Dependency struct {
	Stage  string
	Policy protocol.DependencyPolicy
}

// Check is a deterministic check the reviewing coordinator runs on a
// stage's outputs (spec 13.2, second step): Command (argv, no shell) must
// exit with Pass.ExitCode and, when set, print Pass.StdoutContains.
type Check struct {
	Name    string
	Command []string
	Pass    Pass
}

// Pass says what result of a check passes.
type Pass struct {
	ExitCode       int
	StdoutContains string
}

// Problem is one thing wrong with a plan file, at a 1-based line and
// column. Path is the JSON pointer of the value at fault ("" for the
// file as a whole or a syntax error).
type Problem struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String is LINE:COL: message.
func (p Problem) String() string { return fmt.Sprintf("%d:%d: %s", p.Line, p.Column, p.Message) }

// Error is every problem of one plan file, sorted by line and column.
type Error struct {
	File     string
	Problems []Problem
}

// Error prints one problem a line, FILE:LINE:COL: message.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s:%s", e.File, p)
	}
	return b.String()
}

// Unwrap gives the protocol error a plan problem is, so protocol.CodeOf
// reads SCHEMA_VALIDATION_FAILED, with the first problem's pointer.
func (e *Error) Unwrap() error {
	pe := protocol.Errorf(protocol.CodeSchemaValidationFailed, "plan %s: %d problem(s)", e.File, len(e.Problems))
	if len(e.Problems) > 0 {
		pe = pe.At(e.Problems[0].Path)
	}
	return pe
}

// MaxSize is the largest plan file Parse reads: plans are written by hand
// or by a tool, and a few hundred stages fit in a small fraction of it.
const MaxSize = 4 << 20

// Parse reads a plan file (YAML, or JSON) named name. It returns the plan,
// or an *Error listing every problem found: syntax, unknown members, wrong
// types and every other schema violation, and the checks the schema cannot
// make (stage ids, dependencies, cycles, reviews, version ranges,
// deadlines, budgets against the Mission's, derived id lengths).
func Parse(name string, data []byte) (*Plan, error) {
	if len(data) > MaxSize {
		return nil, newError(name, []Problem{{Line: 1, Column: 1, Message: fmt.Sprintf("the plan is larger than %d bytes", MaxSize)}})
	}
	t, ps := parseTree(data)
	if t != nil {
		sps, err := validate(t)
		if err != nil {
			return nil, err
		}
		// A value the tree already refused (an alias, a tag, an
		// infinity) reads as null; its schema complaint would repeat it.
		for _, p := range sps {
			if !t.refused[p.Path] {
				ps = append(ps, p)
			}
		}
		p, cps := build(t)
		ps = append(ps, cps...)
		if len(ps) == 0 {
			p.Name = name
			return p, nil
		}
	}
	return nil, newError(name, ps)
}

func newError(name string, ps []Problem) *Error {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Message, b.Message))
	})
	// One fault can reach the same place by two schema paths.
	ps = slices.Compact(ps)
	return &Error{File: name, Problems: ps}
}

// Stage returns the stage with id, or nil.
func (p *Plan) Stage(id string) *Stage {
	for i := range p.Stages {
		if p.Stages[i].ID == id {
			return &p.Stages[i]
		}
	}
	return nil
}
