package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/missionweave/mwp-worker/plan"
	"github.com/urfave/cli/v3"
)

// planResult is `plan validate --json`'s line for one file (docs/shapes.md).
type planResult struct {
	File     string         `json:"file"`
	OK       bool           `json:"ok"`
	Stages   int            `json:"stages"`
	Problems []plan.Problem `json:"problems"`
	Error    string         `json:"error,omitempty"`
	// NeedsInput names the inputs only `--input NAME=FILE` can give.
	NeedsInput []string `json:"needsInput,omitempty"`
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "plan files: a Mission and its stages as a DAG (docs/plans.md)",
		Commands: []*cli.Command{
			{
				Name:      "validate",
				Usage:     "check plan files and report every problem with its line",
				ArgsUsage: "FILE...",
				Description: "Each FILE (YAML or JSON; - for stdin) is parsed and checked against the plan schema and the\n" +
					"rules the schema cannot express (docs/plans.md), and each input's file must exist. Prints FILE: ok,\n" +
					"N stages (with \"; give --input NAME=FILE\" for inputs only the command line can give), or one line per\n" +
					"problem, FILE:LINE:COL: message, sorted by line. Exits 1 when any file has a problem.",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per file, one per line"}},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					if cmd.NArg() == 0 {
						return fmt.Errorf("plan validate needs at least one FILE")
					}
					out := cmd.Root().Writer
					enc := json.NewEncoder(out)
					enc.SetEscapeHTML(false)
					failed := false
					for _, name := range cmd.Args().Slice() {
						r := validatePlan(name, os.Stdin)
						failed = failed || !r.OK
						if cmd.Bool("json") {
							if err := enc.Encode(r); err != nil {
								return err
							}
							continue
						}
						switch {
						case r.Error != "":
							fmt.Fprintf(out, "%s: %s\n", r.File, r.Error)
						case r.OK && len(r.NeedsInput) > 0:
							fmt.Fprintf(out, "%s: ok, %d stages; give --input %s=FILE\n", r.File, r.Stages, strings.Join(r.NeedsInput, "=FILE --input "))
						case r.OK:
							fmt.Fprintf(out, "%s: ok, %d stages\n", r.File, r.Stages)
						default:
							for _, p := range r.Problems {
								fmt.Fprintf(out, "%s:%s\n", r.File, p)
							}
						}
					}
					if failed {
						return exitError{1}
					}
					return nil
				},
			},
			{
				Name:  "schema",
				Usage: "print the JSON Schema (2020-12) of plan files",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					_, err := cmd.Root().Writer.Write(plan.Schema)
					return err
				},
			},
		},
	}
}

// validatePlan reads and parses one plan file; it never panics on content.
func validatePlan(name string, stdin io.Reader) planResult {
	r := planResult{File: name, Problems: []plan.Problem{}}
	data, err := readPlan(name, stdin)
	if err != nil {
		r.Error = "cannot read: " + err.Error()
		return r
	}
	p, err := plan.Parse(name, data)
	var pe *plan.Error
	switch {
	case err == nil:
		r.OK, r.Stages = true, len(p.Stages)
		r.NeedsInput, r.Problems = inputProblems(p)
		if len(r.Problems) > 0 {
			r.OK, r.Stages, r.NeedsInput = false, 0, nil
		}
	case errors.As(err, &pe):
		r.Problems = pe.Problems
	default:
		r.Error = err.Error()
	}
	return r
}

// inputProblems checks what plan.Parse cannot: that each input's file
// exists beside the plan. It returns the inputs that only --input can give.
func inputProblems(p *plan.Plan) (needs []string, problems []plan.Problem) {
	problems = []plan.Problem{}
	for _, in := range p.Inputs {
		if in.File == "" {
			needs = append(needs, in.Name)
			continue
		}
		path := in.File
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(p.Name), path)
		}
		if _, err := os.Stat(path); err != nil {
			problems = append(problems, plan.Problem{Line: in.Line, Column: in.Column, Path: in.Path, Message: fmt.Sprintf("input %q: file %s: %v", in.Name, path, errors.Unwrap(err))})
		}
	}
	return needs, problems
}

// readPlan reads at most plan.MaxSize+1 bytes, so an oversized file is
// refused by Parse without being read whole.
func readPlan(name string, stdin io.Reader) ([]byte, error) {
	var f io.Reader = stdin
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		f = file
	}
	return io.ReadAll(io.LimitReader(f, plan.MaxSize+1))
}
