package group

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The coverage page and the scenario files it cites.
const (
	coverageDoc  = "../docs/coverage-10.2.md"
	scenariosDir = "testdata/scenarios"
)

// The tables of the coverage page that are state machines, the scenario
// file whose rows each must cite, and how many rows each has: 18 in the
// transition table of spec 10.2, 10 in docs/design.md §11.
var coverageTables = []struct {
	heading string
	file    string
	rows    int
}{
	{"## WorkItem, spec 10.2", "rows-10.2.txt", 18},
	{"## Mission, design.md §11", "mission.txt", 10},
}

// scenarioCase is what the coverage check needs to know of one case.
type scenarioCase struct {
	leaf     bool // it has no nested cases
	accepted bool // some directive printed an event
	refused  bool // some directive printed a refusal
}

var (
	scenarioRef = regexp.MustCompile("`([A-Za-z0-9._-]+\\.txt):([^`]+)`")
	goTestRef   = regexp.MustCompile("`(Test[A-Za-z0-9_]+)(/[^`]*)?`")
	eventLine   = regexp.MustCompile(`^\S+ \S+/\S+ rev=\d+`)
)

// readScenarios parses every scenario file: its cases, by full name, and
// its rows (the top-level cases).
func readScenarios(t *testing.T) (cases map[string]map[string]*scenarioCase, rows map[string][]string) {
	t.Helper()
	cases, rows = map[string]map[string]*scenarioCase{}, map[string][]string{}
	entries, err := os.ReadDir(scenariosDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(scenariosDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		if !strings.HasPrefix(lines[0], "# ") {
			t.Errorf("%s: must open with a comment paragraph citing its spec section", e.Name())
		}
		file := map[string]*scenarioCase{}
		var open []string
		output := false
		for _, line := range lines {
			switch {
			case output && line == "":
				output = false
			case output:
				if len(open) == 0 {
					continue
				}
				c := file[open[len(open)-1]]
				c.refused = c.refused || strings.HasPrefix(line, "error: ")
				c.accepted = c.accepted || eventLine.MatchString(line)
			case line == "----":
				output = true
			case line == "subtest end" || strings.HasPrefix(line, "subtest end "):
				open = open[:len(open)-1]
			case strings.HasPrefix(line, "subtest "):
				name := strings.TrimPrefix(line, "subtest ")
				if len(open) == 0 {
					rows[e.Name()] = append(rows[e.Name()], name)
				} else {
					file[open[len(open)-1]].leaf = false
				}
				file[name] = &scenarioCase{leaf: true}
				open = append(open, name)
			}
		}
		cases[e.Name()] = file
	}
	return cases, rows
}

// goTests lists every Test function of the module.
func goTests(t *testing.T) map[string]bool {
	t.Helper()
	tests := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

// TestCoverageDoc keeps docs/coverage-10.2.md true: every row of its state
// tables cites a positive and a negative scenario case, every case it cites
// exists (and a negative one holds a refusal), every row of the scenario
// files is cited, and every Go test it names exists.
func TestCoverageDoc(t *testing.T) {
	b, err := os.ReadFile(coverageDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	cases, rows := readScenarios(t)
	tests := goTests(t)

	lookup := func(where, ref string) *scenarioCase {
		m := scenarioRef.FindStringSubmatch(ref)
		file, name := m[1], m[2]
		c := cases[file][name]
		switch {
		case cases[file] == nil:
			t.Errorf("%s: %s names %s, which is not a scenario file", where, ref, file)
		case c == nil:
			t.Errorf("%s: %s names a case that %s does not have", where, ref, file)
		case !c.leaf:
			t.Errorf("%s: %s is a group of cases; name one case", where, ref)
		default:
			return c
		}
		return nil
	}

	// Every reference anywhere on the page resolves.
	for _, m := range scenarioRef.FindAllString(doc, -1) {
		lookup("coverage-10.2.md", m)
	}
	for _, m := range goTestRef.FindAllStringSubmatch(doc, -1) {
		if !tests[m[1]] {
			t.Errorf("coverage-10.2.md names %s, which is not a Go test of the module", m[1])
		}
	}

	for _, table := range coverageTables {
		start := strings.Index(doc, "\n"+table.heading+"\n")
		if start < 0 {
			t.Errorf("coverage-10.2.md has no section %q", table.heading)
			continue
		}
		var lines []string
		for _, line := range strings.Split(doc[start+len(table.heading)+2:], "\n") {
			if strings.HasPrefix(line, "## ") {
				break
			}
			if strings.HasPrefix(line, "|") {
				lines = append(lines, line)
			}
		}
		if len(lines) < 2 {
			t.Errorf("%s: no table", table.heading)
			continue
		}
		body := lines[2:] // header and separator
		if len(body) != table.rows {
			t.Errorf("%s: %d rows, want %d", table.heading, len(body), table.rows)
		}
		cited := map[string][2]bool{} // scenario row of table.file → positive, negative cited
		for _, line := range body {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 3 {
				t.Errorf("%s: %q does not have the three cells row, positive, negative", table.heading, line)
				continue
			}
			row := strings.TrimSpace(cells[0])
			for col, cell := range cells[1:] {
				negative := col == 1
				found := false
				for _, ref := range scenarioRef.FindAllString(cell, -1) {
					c := lookup(row, ref)
					if c == nil {
						continue
					}
					if negative && !c.refused {
						t.Errorf("%s: %s is cited as negative but refuses nothing", row, ref)
						continue
					}
					if !negative && !c.accepted {
						continue // counts only with an accepted command (the offer-expiry row also cites cases without events)
					}
					found = true
					m := scenarioRef.FindStringSubmatch(ref)
					if m[1] == table.file {
						top, _, _ := strings.Cut(m[2], "/")
						v := cited[top]
						v[col] = true
						cited[top] = v
					}
				}
				if !found {
					t.Errorf("%s: no %s scenario case", row, map[bool]string{false: "positive (accepted)", true: "negative (refused)"}[negative])
				}
			}
		}
		for _, r := range rows[table.file] {
			if v := cited[r]; !v[0] || !v[1] {
				t.Errorf("%s: row %q of %s lacks a cited positive or negative case (positive %v, negative %v)", table.heading, r, table.file, v[0], v[1])
			}
		}
		if len(rows[table.file]) != table.rows {
			t.Errorf("%s has %d rows, the table %d", table.file, len(rows[table.file]), table.rows)
		}
	}

	// Every scenario file is one the page cites.
	for file := range cases {
		if !strings.Contains(doc, "`"+file+":") {
			t.Errorf("scenario file %s is not cited by coverage-10.2.md", file)
		}
	}
	if cases["rows-10.2.txt"] == nil {
		t.Error("no rows-10.2.txt scenario file")
	}
}

// TestCoverageAuthorityDoc keeps docs/coverage-authority.md and
// docs/status.md true: every Go test they name exists in the module, and
// every count of event types coverage-authority.md states is that of Events.
func TestCoverageAuthorityDoc(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "coverage-authority.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := goTests(t)
	// The status page cites tests as the evidence of each spec area.
	status, err := os.ReadFile(filepath.Join("..", "docs", "status.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, m := range goTestRef.FindAllStringSubmatch(string(status), -1) {
		cited++
		if !tests[m[1]] {
			t.Errorf("docs/status.md names %s, which is not a Go test of the module", m[1])
		}
	}
	if cited < 10 {
		t.Errorf("docs/status.md names only %d tests; did its evidence move?", cited)
	}
	n := 0
	for _, m := range goTestRef.FindAllStringSubmatch(string(raw), -1) {
		n++
		if !tests[m[1]] {
			t.Errorf("coverage-authority.md names %s, which is not a Go test of the module", m[1])
		}
	}
	if n < 20 {
		t.Fatalf("coverage-authority.md names only %d tests; did the page move?", n)
	}
	// A count of event types the page states is that of Events.
	for _, m := range eventTypeCount.FindAllStringSubmatch(string(raw), -1) {
		if m[1] != strconv.Itoa(len(Events)) {
			t.Errorf("coverage-authority.md says %q; group.Events has %d types", m[0], len(Events))
		}
	}
}

// eventTypeCount finds a stated count of event types: "all 41 types".
var eventTypeCount = regexp.MustCompile(`all (\d+) (?:event )?types`)
