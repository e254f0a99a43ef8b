package plan

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// inputsPlan names three inputs: spec by --input only (stages a and b),
// data by a file beside the plan, and a digest input that needs nothing.
var inputsPlan = head + stage("a", "inputs: [{name: spec}, {name: data, file: in/data.csv}]") +
	stage("b", "inputs: [{name: spec}, {artifact: "+digestA+", name: fixed}]", "dependsOn: [a]")

func TestInputs(t *testing.T) {
	p, err := Parse(filepath.Join("plans", "p.yaml"), []byte(inputsPlan))
	if err != nil {
		t.Fatal(err)
	}
	want := []Input{{Name: "spec", Stages: []string{"a", "b"}, Path: "/stages/0/inputs/0", Line: 19, Column: 14},
		{Name: "data", File: "in/data.csv", Stages: []string{"a"}, Path: "/stages/0/inputs/1/file", Line: 19, Column: 47}}
	if !reflect.DeepEqual(p.Inputs, want) {
		t.Fatalf("Inputs = %+v, want %+v", p.Inputs, want)
	}
	if _, err := p.Contract("a", time.Time{}); err == nil || !strings.Contains(err.Error(), `input "spec"`) {
		t.Fatalf("Contract before Bind: %v, want a refusal naming the input", err)
	}

	cases := []struct {
		name  string
		given map[string]string
		want  map[string]string
		err   string
	}{
		{"spec given, data from the plan's directory", map[string]string{"spec": "/tmp/s.md"},
			map[string]string{"spec": "/tmp/s.md", "data": filepath.Join("plans", "in", "data.csv")}, ""},
		{"the command line wins over file", map[string]string{"spec": "s", "data": "d"}, map[string]string{"spec": "s", "data": "d"}, ""},
		{"nobody provides spec", nil, nil, `plan plans/p.yaml names input "spec" (line 19, stage a, b) and nobody provides it: give --input NAME=FILE`},
		{"an input the plan does not name", map[string]string{"spec": "s", "nope": "x"}, nil, `--input nope: plan plans/p.yaml has no input named "nope" (it names spec, data)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.InputFiles(c.given)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v, want %s", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("InputFiles = %v, %v, want %v", got, err, c.want)
			}
		})
	}

	if err := p.Bind(map[string]string{"spec": digestA}); err == nil {
		t.Fatal("Bind without data succeeded")
	}
	digestB := strings.Replace(digestA, "a", "b", -1)
	if err := p.Bind(map[string]string{"spec": digestA, "data": digestB}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{"a": {"spec=" + digestA, "data=" + digestB}, "b": {"spec=" + digestA, "fixed=" + digestA}} {
		c, err := p.Contract(id, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range c.Inputs {
			got = append(got, in.Name+"="+in.Artifact)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("stage %s inputs %v, want %v", id, got, want)
		}
	}
}

func TestInputProblems(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"neither artifact nor name", head + stage("a", "inputs: [{file: x}]"), []string{`19:14: an object is not an input with an artifact digest or a name`}},
		{"artifact and file", head + stage("a", "inputs: [{artifact: "+digestA+", file: x}]"), []string{`19:104: an input has an artifact digest or a file, not both`}},
		{"one name, two files", head + stage("a", "inputs: [{name: n, file: x}]") + stage("b", "inputs: [{name: n, file: y}]"),
			[]string{`27:30: input "n" is file "x" at line 19: one name is one input`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.src))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want problems", err)
			}
			var got []string
			for _, pr := range pe.Problems {
				got = append(got, pr.String())
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("problems:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"), numbered(c.src))
			}
		})
	}
}
