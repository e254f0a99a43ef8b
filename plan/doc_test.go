package plan

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// schemaPaths lists every member the schema allows, as dotted paths with
// [] for array items (stages[].retry.backoff.maxMs), following local $refs.
func schemaPaths(t *testing.T) []string {
	var doc map[string]any
	if err := json.Unmarshal(Schema, &doc); err != nil {
		t.Fatal(err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	var out []string
	var walk func(s any, path string, depth int)
	walk = func(s any, path string, depth int) {
		m, ok := s.(map[string]any)
		if !ok || depth > 20 {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/$defs/")
			if !found || defs[name] == nil {
				t.Fatalf("unexpected $ref %q at %s", ref, path)
			}
			walk(defs[name], path, depth+1)
		}
		props, _ := m["properties"].(map[string]any)
		for k, v := range props {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out = append(out, p)
			walk(v, p, depth+1)
		}
		walk(m["items"], path+"[]", depth+1)
		for _, key := range []string{"anyOf", "oneOf", "allOf"} {
			list, _ := m[key].([]any)
			for _, alt := range list {
				walk(alt, path, depth+1)
			}
		}
	}
	walk(doc, "", 0)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDocCoversSchema fails when a member of the schema is not documented
// in docs/plans.md as `its.dotted.path`, so the page and the schema cannot
// drift apart; and when the page documents a path the schema lacks.
func TestDocCoversSchema(t *testing.T) {
	page, err := os.ReadFile("../docs/plans.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := schemaPaths(t)
	if len(paths) < 60 {
		t.Fatalf("only %d schema paths found: the walk is broken", len(paths))
	}
	for _, p := range paths {
		if !strings.Contains(string(page), "`"+p+"`") {
			t.Errorf("docs/plans.md does not document `%s`", p)
		}
	}
	// The reference tables' first column must name schema paths only.
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.TrimPrefix(strings.SplitN(line, "|", 3)[1], " ")
		for _, name := range strings.Split(strings.TrimSpace(cell), ", ") {
			name = strings.Trim(name, "`")
			if !slices.Contains(paths, name) {
				t.Errorf("docs/plans.md documents `%s`, which the schema does not have", name)
			}
		}
	}
}

// TestDeadlineShapes keeps the Go copies of the deadline patterns equal to
// the schema's.
func TestDeadlineShapes(t *testing.T) {
	var doc struct {
		Defs struct {
			Deadline struct {
				AnyOf []struct{ Pattern string } `json:"anyOf"`
			} `json:"deadline"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &doc); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, a := range doc.Defs.Deadline.AnyOf {
		got = append(got, a.Pattern)
	}
	if want := []string{durationShape.String(), timeShape.String()}; !slices.Equal(got, want) {
		t.Errorf("schema deadline patterns %q, Go has %q", got, want)
	}
}
