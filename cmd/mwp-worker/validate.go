package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/urfave/cli/v3"
)

// problem is one line of validate's output.
type problem struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// fileResult is validate's verdict on one file.
type fileResult struct {
	File     string    `json:"file"`
	Schema   string    `json:"schema,omitempty"`
	Valid    bool      `json:"valid"`
	Problems []problem `json:"problems"`
}

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check JSON documents against the MissionWeaveProtocol 0.1 schemas",
		ArgsUsage: "FILE...",
		Description: "Each FILE (or - for stdin) is decoded under the strict I-JSON rules, then validated against\n" +
			"the schema named by --schema (the file name without .schema.json: command, event,\n" +
			"websocket-frame, work-contract, error, ...) or, without it, the schema detected from the\n" +
			"document. Commands are also checked against the epoch rules of spec 15.1 and for unknown\n" +
			"critical extensions. Prints one line per problem, FILE: CODE: JSON-pointer: message, and\n" +
			"exits 0 only when every file is valid.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "schema", Usage: "schema `NAME` to validate against (default: the one detected from the document)"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
			maxBytesFlag(), maxDepthFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.NArg() == 0 {
				return fmt.Errorf("validate needs at least one FILE")
			}
			schema := cmd.String("schema")
			if schema != "" && !slices.Contains(protocol.SchemaNames, schema) {
				return fmt.Errorf("unknown schema %q (known: %s)", schema, strings.Join(protocol.SchemaNames, ", "))
			}
			opts := decodeOptions(cmd)
			var results []fileResult
			allValid := true
			for _, name := range cmd.Args().Slice() {
				r := validateFile(name, schema, opts)
				allValid = allValid && r.Valid
				results = append(results, r)
			}
			out := cmd.Root().Writer
			if cmd.Bool("json") {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(struct {
					Valid bool         `json:"valid"`
					Files []fileResult `json:"files"`
				}{allValid, results}); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.Valid {
						fmt.Fprintf(out, "%s: ok (%s)\n", r.File, r.Schema)
						continue
					}
					for _, p := range r.Problems {
						fmt.Fprintf(out, "%s: %s: %s: %s\n", r.File, p.Code, p.Pointer, p.Message)
					}
				}
			}
			if !allValid {
				return exitError{1}
			}
			return nil
		},
	}
}

// validateFile runs every check on one file and never panics on its content.
func validateFile(name, schema string, opts protocol.DecodeOptions) fileResult {
	r := fileResult{File: name, Schema: schema, Problems: []problem{}}
	fail := func(err error) fileResult {
		var ve *protocol.ValidationError
		var pe *protocol.Error
		switch {
		case errors.As(err, &ve):
			for _, p := range ve.Problems {
				r.Problems = append(r.Problems, problem{string(p.Code), p.Pointer, p.Message})
			}
		case errors.As(err, &pe):
			r.Problems = append(r.Problems, problem{string(pe.Code), pe.Pointer, pe.Message})
		default:
			r.Problems = append(r.Problems, problem{"IO_ERROR", "", err.Error()})
		}
		return r
	}
	data, err := readInput(name, os.Stdin)
	if err != nil {
		return fail(fmt.Errorf("cannot read: %w", err))
	}
	used, err := protocol.CheckDocument(data, schema, opts)
	r.Schema = used
	if err != nil {
		return fail(err)
	}
	r.Valid = true
	return r
}
