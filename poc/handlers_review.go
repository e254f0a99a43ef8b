package poc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"go/token"
	"regexp"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// The deterministic parts shared by the handlers and the coordinator's
// reviewer: the feature request's validation, the code the implementation
// writes, the requirements note's machine-readable block, the test report,
// and the rule-based review of a diff.

var fileName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Validate reports a feature request the handlers cannot implement.
func (f Feature) Validate() error {
	switch {
	case f.ID == "":
		return fmt.Errorf("feature: id is required")
	case !token.IsIdentifier(f.Package) || token.IsKeyword(f.Package):
		return fmt.Errorf("feature %s: package %q is not an identifier", f.ID, f.Package)
	case !token.IsIdentifier(f.Func) || !token.IsExported(f.Func):
		return fmt.Errorf("feature %s: func %q is not an exported identifier", f.ID, f.Func)
	case !fileName.MatchString(f.File):
		return fmt.Errorf("feature %s: file %q is not a plain lower-case name", f.ID, f.File)
	case !strings.HasPrefix(f.Signature, "("):
		return fmt.Errorf("feature %s: signature %q must start with the parameter list", f.ID, f.Signature)
	case len(f.Body) == 0:
		return fmt.Errorf("feature %s: the body is empty", f.ID)
	case len(f.Cases) == 0:
		return fmt.Errorf("feature %s: no acceptance test case", f.ID)
	case strings.ContainsAny(f.Changelog, "\n\r"):
		return fmt.Errorf("feature %s: the changelog line spans lines", f.ID)
	}
	return nil
}

// RenderFeature returns the source and test files implementing f, gofmt'd.
func RenderFeature(f Feature) (src, test string, err error) {
	if err := f.Validate(); err != nil {
		return "", "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n// %s\nfunc %s%s {\n%s\n}\n", f.Package, f.Doc, f.Func, f.Signature, strings.Join(f.Body, "\n"))
	s, err := format.Source([]byte(b.String()))
	if err != nil {
		return "", "", fmt.Errorf("feature %s: the body does not parse: %w", f.ID, err)
	}
	var t strings.Builder
	fmt.Fprintf(&t, "package %s\n\nimport \"testing\"\n\nfunc Test%s(t *testing.T) {\ncases := []struct {\nname string\ngot, want any\n}{\n", f.Package, f.Func)
	for _, c := range f.Cases {
		call := fmt.Sprintf("%s(%s)", f.Func, c.Args)
		fmt.Fprintf(&t, "{%q, %s, %s},\n", call, call, c.Want)
	}
	t.WriteString("}\nfor _, c := range cases {\nif c.got != c.want {\nt.Errorf(\"%s = %v, want %v\", c.name, c.got, c.want)\n}\n}\n}\n")
	ts, err := format.Source([]byte(t.String()))
	if err != nil {
		return "", "", fmt.Errorf("feature %s: a test case does not parse: %w", f.ID, err)
	}
	return string(s), string(ts), nil
}

// ImplementFeature returns base with f implemented: the source and test
// files (re)written, and the changelog line (once) and the requested
// changes appended.
func ImplementFeature(base Tree, f Feature, changes []string) (Tree, error) {
	src, test, err := RenderFeature(f)
	if err != nil {
		return nil, err
	}
	out := base.Clone()
	dir := f.Package + "/"
	out[dir+f.File+".go"] = src
	out[dir+f.File+"_test.go"] = test
	log := out["CHANGELOG.md"]
	if log != "" && !strings.HasSuffix(log, "\n") {
		log += "\n"
	}
	if entry := "- " + f.Changelog + "\n"; !strings.Contains(log, entry) {
		log += entry // a rework on top of the first patch keeps its entry
	}
	for _, c := range changes {
		log += "  - " + strings.Join(strings.Fields(c), " ") + "\n"
	}
	out["CHANGELOG.md"] = log
	return out, nil
}

// specFence marks the requirements note's machine-readable block.
const specFence = "```json feature-spec\n"

// RequirementsNote renders the note the requirements stage publishes: the
// human-readable requirements and, in a fenced block, the feature spec the
// implementation reads back.
func RequirementsNote(f Feature, source string) ([]byte, error) {
	spec, err := protocol.Marshal(f)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Requirements: %s.%s\n\nSource: feature request `%s`\n\n", f.Package, f.Func, source)
	fmt.Fprintf(&b, "## Function\n\n`func %s%s` in package `%s`, file `%s/%s.go`.\n\n%s\n\n", f.Func, f.Signature, f.Package, f.Package, f.File, f.Doc)
	b.WriteString("## Acceptance test cases\n\n| call | want |\n| --- | --- |\n")
	for _, c := range f.Cases {
		fmt.Fprintf(&b, "| `%s(%s)` | `%s` |\n", f.Func, c.Args, c.Want)
	}
	fmt.Fprintf(&b, "\n## Changelog\n\n%s\n\n## Spec\n\n%s%s\n```\n", f.Changelog, specFence, spec)
	return b.Bytes(), nil
}

// FeatureFromNote reads the feature spec back from a requirements note.
func FeatureFromNote(note []byte) (Feature, error) {
	_, rest, ok := bytes.Cut(note, []byte(specFence))
	if !ok {
		return Feature{}, fmt.Errorf("requirements note: no feature-spec block")
	}
	block, _, ok := bytes.Cut(rest, []byte("\n```"))
	if !ok {
		return Feature{}, fmt.Errorf("requirements note: unterminated feature-spec block")
	}
	return DecodeFeature(block)
}

// DecodeFeature strictly decodes a feature request and validates it.
func DecodeFeature(raw []byte) (Feature, error) {
	var f Feature
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Feature{}, fmt.Errorf("feature request: %w", err)
	}
	return f, f.Validate()
}

// TestReport is the testing stage's output.
type TestReport struct {
	Patch    string `json:"patch"` // digest of the patch under test
	Applied  bool   `json:"applied"`
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exitCode"`
	Command  string `json:"command"`
	Tests    int    `json:"tests"` // "--- PASS"/"ok" lines seen; 0 when not run
	Output   string `json:"output"`
}

// Finding is one observation of the rule-based reviewer.
type Finding struct {
	File     string `json:"file"`
	Rule     string `json:"rule"`
	Blocking bool   `json:"blocking"`
	Detail   string `json:"detail"`
}

// Review is the rule-based reviewer's verdict over a diff.
type Review struct {
	Files    []FileChange
	Findings []Finding
}

// Blocking reports whether any finding blocks acceptance.
func (r Review) Blocking() bool {
	for _, f := range r.Findings {
		if f.Blocking {
			return true
		}
	}
	return false
}

// ReviewDiff is the deterministic reviewer: the patch must apply to base,
// add no TODO/FIXME/XXX, touch a _test.go file when it touches Go code,
// leave Go files gofmt-clean, and (given a report) have passed its tests.
func ReviewDiff(base Tree, patch string, report *TestReport) Review {
	var r Review
	patched, changes, err := ApplyPatch(base, patch)
	if err != nil {
		r.Findings = append(r.Findings, Finding{Rule: "patch-applies", Blocking: true, Detail: err.Error()})
		if changes, perr := ParsePatch(patch); perr == nil {
			r.Files = changes
		}
		return r
	}
	r.Files = changes
	goChanged, testChanged := false, false
	for _, c := range changes {
		if strings.HasSuffix(c.Path, ".go") {
			goChanged = true
			if strings.HasSuffix(c.Path, "_test.go") {
				testChanged = true
			}
			if src, ok := patched[c.Path]; ok {
				if f, err := format.Source([]byte(src)); err != nil || string(f) != src {
					r.Findings = append(r.Findings, Finding{File: c.Path, Rule: "gofmt", Blocking: true, Detail: "not gofmt-clean"})
				}
			}
		}
		for _, l := range c.Added {
			for _, marker := range []string{"TODO", "FIXME", "XXX"} {
				if strings.Contains(l, marker) {
					r.Findings = append(r.Findings, Finding{File: c.Path, Rule: "no-" + strings.ToLower(marker), Blocking: true, Detail: strings.TrimSpace(l)})
				}
			}
		}
	}
	if goChanged && !testChanged {
		r.Findings = append(r.Findings, Finding{Rule: "tests-touched", Blocking: true, Detail: "Go code changed without a _test.go change"})
	}
	if report != nil && !report.Passed {
		r.Findings = append(r.Findings, Finding{Rule: "tests-pass", Blocking: true, Detail: fmt.Sprintf("the test report for %s says fail", report.Patch)})
	}
	return r
}

// ReviewNotes renders a Review as the review stage's markdown.
func ReviewNotes(r Review, patch, report string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Code review\n\nPatch `%s`, test report `%s`.\n\n## Files\n\n", patch, report)
	for _, c := range r.Files {
		fmt.Fprintf(&b, "- `%s`: +%d −%d", c.Path, len(c.Added), len(c.Removed))
		if c.Created {
			b.WriteString(" (new)")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Findings\n\n")
	if len(r.Findings) == 0 {
		b.WriteString("None. Approved.\n")
	}
	for _, f := range r.Findings {
		sev := "note"
		if f.Blocking {
			sev = "blocking"
		}
		fmt.Fprintf(&b, "- %s %s `%s`: %s\n", sev, f.Rule, f.File, f.Detail)
	}
	return b.Bytes()
}
