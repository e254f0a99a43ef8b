package protocol

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// conformanceDir holds our structural conformance suite (see its README.md).
const conformanceDir = "testdata/conformance"

// The minimum counts: spec 22 names a suite of 27 valid and 31 invalid
// documents; ours must be at least as large.
const (
	minConformanceValid   = 27
	minConformanceInvalid = 31
)

type conformanceManifest struct {
	Suite           string              `json:"suite"`
	ProtocolVersion string              `json:"protocolVersion"`
	Description     string              `json:"description"`
	Vectors         []conformanceVector `json:"vectors"`
}

type conformanceVector struct {
	File string `json:"file"`
	// Schema is the schema to check against; "" means detect it.
	Schema string `json:"schema"`
	// DetectedSchema, when present, is what CheckDocument must report as
	// the schema used ("" when detection must fail); only for vectors
	// without Schema.
	DetectedSchema *string `json:"detectedSchema"`
	Expect         string  `json:"expect"` // "valid" or "invalid"
	Code           Code    `json:"code"`
	Pointer        *string `json:"pointer"` // nil: not checked
	Rule           string  `json:"rule"`
}

func loadConformanceManifest(t *testing.T) conformanceManifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(conformanceDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The manifest itself must pass our strict decoder, and its members
	// must all be known (a typo such as "pointr" would silently skip a check).
	if _, err := Parse(data, DecodeOptions{}); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var m conformanceManifest
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return m
}

// conformanceCounts finds the suite's counts where a document states them:
// "N documents expected valid and M expected invalid" (manifest.json) or
// "N valid, M invalid" (README.md).
var conformanceCounts = regexp.MustCompile(`(\d+) (?:documents expected )?valid(?:,| and) (\d+) (?:expected )?invalid`)

func statusText(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "status.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func readmeText(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestConformanceManifest checks the suite's bookkeeping: every file under
// valid/ and invalid/ is listed exactly once, every listed file exists,
// each entry is well formed, and the counts the manifest's description and
// the README state are the suite's.
func TestConformanceManifest(t *testing.T) {
	m := loadConformanceManifest(t)
	if m.Suite != "mwp-worker structural conformance" || m.ProtocolVersion != "0.1" || m.Description == "" {
		t.Errorf("manifest header: suite %q, protocolVersion %q, description empty: %v", m.Suite, m.ProtocolVersion, m.Description == "")
	}

	listed := map[string]int{}
	counts := map[string]int{}
	for _, v := range m.Vectors {
		listed[v.File]++
		counts[v.Expect]++
		dir := strings.SplitN(v.File, "/", 2)[0]
		switch {
		case v.Expect != "valid" && v.Expect != "invalid":
			t.Errorf("%s: expect %q, want valid or invalid", v.File, v.Expect)
		case dir != v.Expect:
			t.Errorf("%s: expect %q but the file is under %s/", v.File, v.Expect, dir)
		case v.Expect == "valid" && (v.Code != "" || v.Pointer != nil):
			t.Errorf("%s: a valid vector names no code or pointer", v.File)
		case v.Expect == "invalid" && (!v.Code.Known() || v.Rule == ""):
			t.Errorf("%s: an invalid vector needs a core code (got %q) and the rule it breaks", v.File, v.Code)
		}
		if v.Schema != "" && v.DetectedSchema != nil {
			t.Errorf("%s: detectedSchema is only for vectors that omit schema", v.File)
		}
		if v.Schema != "" && !knownSchemaName(v.Schema) {
			t.Errorf("%s: unknown schema %q", v.File, v.Schema)
		}
		if !strings.HasSuffix(v.File, ".json") || filepath.Clean(v.File) != v.File {
			t.Errorf("%s: want a clean relative path to a .json file", v.File)
		}
	}
	for f, n := range listed {
		if n > 1 {
			t.Errorf("%s is listed %d times", f, n)
		}
	}

	var onDisk []string
	for _, dir := range []string{"valid", "invalid"} {
		entries, err := os.ReadDir(filepath.Join(conformanceDir, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			onDisk = append(onDisk, dir+"/"+e.Name())
		}
	}
	sort.Strings(onDisk)
	present := map[string]bool{}
	for _, f := range onDisk {
		present[f] = true
		if listed[f] == 0 {
			t.Errorf("%s is not listed in manifest.json", f)
		}
	}
	for f := range listed {
		if !present[f] {
			t.Errorf("manifest.json lists %s, which does not exist", f)
		}
	}

	// The counts the description and the README state are the suite's.
	for _, doc := range []struct{ name, text string }{
		{"manifest.json description", m.Description},
		{"README.md", readmeText(t)},
		{"docs/status.md", statusText(t)},
	} {
		got := conformanceCounts.FindStringSubmatch(doc.text)
		if got == nil {
			t.Errorf("%s states no counts (want %q)", doc.name, conformanceCounts.String())
			continue
		}
		valid, _ := strconv.Atoi(got[1])
		invalid, _ := strconv.Atoi(got[2])
		if valid != counts["valid"] || invalid != counts["invalid"] {
			t.Errorf("%s says %d valid and %d invalid, the suite has %d and %d", doc.name, valid, invalid, counts["valid"], counts["invalid"])
		}
	}

	if counts["valid"] < minConformanceValid || counts["invalid"] < minConformanceInvalid {
		t.Errorf("suite has %d valid and %d invalid vectors, want at least %d and %d",
			counts["valid"], counts["invalid"], minConformanceValid, minConformanceInvalid)
	}

	// Every schema but common has at least one valid document.
	covered := map[string]bool{}
	for _, v := range m.Vectors {
		if v.Expect != "valid" {
			continue
		}
		covered[v.Schema] = true
		if v.DetectedSchema != nil {
			covered[*v.DetectedSchema] = true
		}
	}
	for _, n := range SchemaNames {
		if n != "common" && !covered[n] {
			t.Errorf("no valid vector for schema %s", n)
		}
	}
}

func knownSchemaName(n string) bool {
	for _, s := range SchemaNames {
		if s == n {
			return true
		}
	}
	return false
}

// TestConformanceVectors runs CheckDocument on every vector and compares
// the verdict, the code of the first failing check, its pointer and, for
// vectors without a schema, the detected schema.
func TestConformanceVectors(t *testing.T) {
	m := loadConformanceManifest(t)
	for _, v := range m.Vectors {
		t.Run(strings.TrimSuffix(v.File, ".json"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(conformanceDir, v.File))
			if err != nil {
				t.Fatal(err)
			}
			used, err := CheckDocument(data, v.Schema, DecodeOptions{})
			if v.Schema != "" && used != v.Schema {
				t.Errorf("schema used %q, want %q", used, v.Schema)
			}
			if v.DetectedSchema != nil && used != *v.DetectedSchema {
				t.Errorf("detected schema %q, want %q", used, *v.DetectedSchema)
			}
			if v.Expect == "valid" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				// Detection must find the same schema for every valid
				// document, so `mwp-worker validate` works without --schema.
				if v.Schema != "" {
					if got, err := CheckDocument(data, "", DecodeOptions{}); err != nil || got != v.Schema {
						t.Errorf("without a schema: detected %q, err %v; want %q", got, err, v.Schema)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("want invalid (%s, %s), got valid", v.Code, v.Rule)
			}
			// Each invalid vector is a minimal mutation of a valid
			// document: it must break exactly the rule it is named for.
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Problems) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%v", len(ve.Problems), err)
			}
			code, pointer := conformanceVerdict(t, err)
			if code != v.Code {
				t.Errorf("code %s, want %s (%s)\n%v", code, v.Code, v.Rule, err)
			}
			if v.Pointer != nil && pointer != *v.Pointer {
				t.Errorf("pointer %q, want %q (%s)\n%v", pointer, *v.Pointer, v.Rule, err)
			}
		})
	}
}

// conformanceVerdict extracts the code and JSON pointer CheckDocument
// reports: for schema problems the winning code (ValidationError.Code) and
// the pointer of its first problem, as sent on the wire; for the other
// checks the *Error's own.
func conformanceVerdict(t *testing.T, err error) (Code, string) {
	t.Helper()
	var ve *ValidationError
	if errors.As(err, &ve) {
		pe := ve.ProtocolError()
		if pe.Code != ve.Code() {
			t.Errorf("ProtocolError code %s differs from Code() %s", pe.Code, ve.Code())
		}
		return ve.Code(), pe.Pointer
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T is neither *ValidationError nor *Error: %v", err, err)
	}
	return pe.Code, pe.Pointer
}
