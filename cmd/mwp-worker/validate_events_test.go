package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateEventPayloads: validate checks an Event's payload against
// its type's schema and its aggregate kind against its type, with a JSON
// pointer per problem, with and without --schema.
func TestValidateEventPayloads(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "protocol", "testdata", "conformance", "valid", "event-group-work-offer-accepted.json"))
	if err != nil {
		t.Fatal(err)
	}
	event := func(name string, edit func(ev map[string]any)) string {
		t.Helper()
		var ev map[string]any
		if err := json.Unmarshal(base, &ev); err != nil {
			t.Fatal(err)
		}
		edit(ev)
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, name, string(raw))
	}
	anything := event("anything.json", func(ev map[string]any) { ev["payload"] = map[string]any{"anything": "goes"} })
	kind := event("kind.json", func(ev map[string]any) { ev["aggregate"].(map[string]any)["kind"] = "mission" })

	for _, args := range [][]string{{"validate"}, {"validate", "--schema", "event"}} {
		code, out, errs := runCLI(t, append(args, anything, kind)...)
		if code != 1 {
			t.Fatalf("%v: code %d\n%s%s", args, code, out, errs)
		}
		for _, want := range []string{
			anything + `: SCHEMA_VALIDATION_FAILED: /payload: missing required member "ownership"`,
			anything + `: SCHEMA_VALIDATION_FAILED: /payload: missing required member "workItemId"`,
			anything + `: SCHEMA_VALIDATION_FAILED: /payload/anything: unknown member "anything" (additionalProperties false)`,
			kind + `: SCHEMA_VALIDATION_FAILED: /aggregate/kind: value "mission" is not allowed: must be "workItem"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
		if n := strings.Count(out, kind+": "); n != 1 {
			t.Errorf("%v: the wrong aggregate kind is %d problems, want 1:\n%s", args, n, out)
		}
	}
}
