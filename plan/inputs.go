package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Input is an input the plan names without giving its digest: its bytes
// come from a file, given on the command line (`--input NAME=FILE`) or by
// the input's `file` member, and Bind sets the digest they have once they
// are stored. Every stage input with the same name is the same input.
type Input struct {
	Name string
	// File is the plan's `file`, a path relative to the plan file's
	// directory; "" when only the command line can give it.
	File   string
	Stages []string // the stages that read it, in file order
	// Path (a JSON pointer), Line and Column are where it is first named:
	// its `file` member when it has one, else the input.
	Path         string
	Line, Column int
}

// input records stage stageID's input in as a named input when it has no
// digest; a name given two different files is a problem.
func (b *builder) input(p *Plan, stageID string, in node) {
	if in.has("artifact") {
		if in.has("file") {
			b.problem(in.get("file").ptr, "an input has an artifact digest or a file, not both")
		}
		return
	}
	name, file := in.get("name").str(), in.get("file").str()
	if name == "" {
		return // the schema's to report
	}
	for i := range p.Inputs {
		got := &p.Inputs[i]
		if got.Name != name {
			continue
		}
		if in.has("file") && got.File != file {
			b.problem(in.get("file").ptr, "input %q is file %q at line %d: one name is one input", name, got.File, got.Line)
		}
		got.Stages = append(got.Stages, stageID)
		return
	}
	at := in.ptr
	if in.has("file") {
		at = in.get("file").ptr
	}
	w := b.t.where(at, false)
	p.Inputs = append(p.Inputs, Input{Name: name, File: file, Stages: []string{stageID}, Path: at, Line: w.line, Column: w.col})
}

// InputFiles returns the file of every named input: given's (input name
// to path, from --input) over the plan's own `file` members, which are
// resolved against the directory of the plan file p.Name. It refuses a
// name in given that the plan has no input of, and an input neither
// gives a file: its stage could never start.
func (p *Plan) InputFiles(given map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for name, path := range given {
		if !slices.ContainsFunc(p.Inputs, func(in Input) bool { return in.Name == name }) {
			return nil, fmt.Errorf("--input %s: plan %s has no input named %q%s", name, p.Name, name, p.inputNames())
		}
		out[name] = path
	}
	var missing []string
	for _, in := range p.Inputs {
		switch {
		case out[in.Name] != "":
		case in.File != "":
			out[in.Name] = in.File
			if !filepath.IsAbs(in.File) {
				out[in.Name] = filepath.Join(filepath.Dir(p.Name), in.File)
			}
		default:
			missing = append(missing, fmt.Sprintf("%q (line %d, stage %s)", in.Name, in.Line, strings.Join(in.Stages, ", ")))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("plan %s names input %s and nobody provides it: give --input NAME=FILE", p.Name, strings.Join(missing, ", input "))
	}
	return out, nil
}

func (p *Plan) inputNames() string {
	if len(p.Inputs) == 0 {
		return " (it names none)"
	}
	var names []string
	for _, in := range p.Inputs {
		names = append(names, in.Name)
	}
	return " (it names " + strings.Join(names, ", ") + ")"
}

// Bind sets the digest of every named input from digests (input name to
// sha256: digest) in the stages that read it. An input left without one
// is an error: Contract refuses its stages.
func (p *Plan) Bind(digests map[string]string) error {
	for _, in := range p.Inputs {
		if digests[in.Name] == "" {
			return fmt.Errorf("plan %s: input %q has no artifact bound", p.Name, in.Name)
		}
	}
	for i := range p.Stages {
		for j, in := range p.Stages[i].Inputs {
			if d := digests[in.Name]; in.Artifact == "" && d != "" {
				p.Stages[i].Inputs[j].Artifact = d
			}
		}
	}
	return nil
}
