package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// FuzzParse: any input gives a plan or problems, never a panic; every
// problem has a positive line and column, they come sorted, and every plan
// accepted builds Work Contracts the normative schema accepts.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/plans/*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(head + stage("a", "dependsOn: [b]") + stage("b", "reviews: [a]")))
	f.Add([]byte(head + stage("a", "notes: &x y", "allowedTools: [*x]")))
	f.Add([]byte("{\"version\": 1, \"stages\": [{\"id\": \"a\", \"id\": 2}]}"))
	f.Add([]byte("a: [1, 2\n"))
	f.Add([]byte(`{"version": 1, "mission": {"title": "a\/b", "x": "\\\/"}}`))
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T: %v", err, err)
			}
			if p != nil || len(pe.Problems) == 0 {
				t.Fatalf("plan %v with error %v", p, err)
			}
			for _, pr := range pe.Problems {
				if pr.Line < 1 || pr.Column < 1 || pr.Message == "" {
					t.Fatalf("problem %+v", pr)
				}
			}
			if !slices.IsSortedFunc(pe.Problems, func(a, b Problem) int { return a.Line - b.Line }) {
				t.Fatalf("problems not sorted by line: %v", pe.Problems)
			}
			return
		}
		if len(p.Stages) == 0 {
			t.Fatal("a plan without stages")
		}
		for _, st := range p.Stages {
			a, err := p.Authorize(st.ID, start)
			if err != nil {
				t.Fatal(err)
			}
			checkContract(t, a)
		}
	})
}
