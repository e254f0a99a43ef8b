package workercmd

import (
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// maxInputBytes bounds one input file: the authority's artifact limit.
const maxInputBytes = 64 << 20

// InputFlag is --input NAME=FILE of up, mission start and coordinator run.
func InputFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "input", Usage: "bind the plan's input `NAME=FILE`: the file is stored as an artifact and every stage input NAME reads it (repeatable; docs/plans.md, Inputs)"}
}

// PlanInputs reads the file of every named input of p (flags: NAME=FILE
// values of --input, over the plan's own `file` members), binds p's inputs
// to their digests, and returns the artifacts for the coordinator to
// store and publish. It refuses, before anything starts, an input nobody
// provides, an --input the plan does not name, and an unreadable file.
func PlanInputs(p *plan.Plan, flags []string) ([]coordinator.Input, error) {
	given, err := InputFlags(flags)
	if err != nil {
		return nil, err
	}
	return BindInputs(p, given)
}

// InputFlags reads --input values, NAME=FILE, into a map.
func InputFlags(flags []string) (map[string]string, error) {
	given := map[string]string{}
	for _, f := range flags {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--input %q: want NAME=FILE", f)
		}
		if _, dup := given[name]; dup {
			return nil, fmt.Errorf("--input %s given twice", name)
		}
		given[name] = path
	}
	return given, nil
}

// BindInputs is PlanInputs with the --input values read (InputFlags).
func BindInputs(p *plan.Plan, given map[string]string) ([]coordinator.Input, error) {
	files, err := p.InputFiles(given)
	if err != nil {
		return nil, err
	}
	digests := map[string]string{}
	var out []coordinator.Input
	for _, in := range p.Inputs {
		path := files[in.Name]
		data, err := readInput(path)
		if err != nil {
			return nil, fmt.Errorf("input %s: %v", in.Name, err)
		}
		digests[in.Name] = protocol.Digest(data)
		out = append(out, coordinator.Input{MediaType: mediaTypeOf(path), Data: data})
	}
	return out, p.Bind(digests)
}

func readInput(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxInputBytes {
		return nil, fmt.Errorf("%s has %d bytes, at most %d", path, fi.Size(), maxInputBytes)
	}
	return os.ReadFile(path)
}

// mediaTypeOf is a file's media type by its extension (the inverse of the
// coordinator's check file names, then the system's table), else
// application/octet-stream.
func mediaTypeOf(path string) string {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".json":
		return "application/json"
	case ".md":
		return "text/markdown"
	case ".txt":
		return "text/plain"
	case ".diff", ".patch":
		return "text/x-diff"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".csv":
		return "text/csv"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		if mt, _, err := mime.ParseMediaType(t); err == nil {
			return mt
		}
	}
	return "application/octet-stream"
}
