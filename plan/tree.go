package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// pos is a place in the plan file, 1-based.
type pos struct{ line, col int }

// tree is the plan as a JSON value (map[string]any, []any, string,
// json.Number, bool, nil) with, per JSON pointer, where the value starts
// and, for a mapping member, where its key is. The schema validates the
// value; every problem finds its line through the pointer.
type tree struct {
	root any
	at   map[string]pos // pointer -> the value's position
	key  map[string]pos // pointer -> the member key's position
	// shifts are the columns, per line, where jsonSlashes dropped a byte.
	shifts map[int][]int
	// refused are the pointers of values replaced by null because YAML
	// had them in a form a plan does not take; their problem is reported.
	refused map[string]bool
}

// where returns the best position for a problem at pointer ptr: the
// member's key when the value is one (an unknown or misplaced member), else
// the value, else the nearest enclosing value.
func (t *tree) where(ptr string, preferKey bool) pos {
	for {
		if preferKey {
			if p, ok := t.key[ptr]; ok {
				return p
			}
		}
		if p, ok := t.at[ptr]; ok {
			return p
		}
		if ptr == "" {
			return pos{1, 1}
		}
		ptr = ptr[:strings.LastIndexByte(ptr, '/')]
	}
}

// yamlLine reads the line and column yaml.v3 puts in its error text
// ("yaml: line 3: ..." or "yaml: line 3, column 7: ..."), which it does not
// expose as fields.
var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+)(?:, column (\d+))?: )?(.*)$`)

// parseTree parses YAML (or JSON, which is YAML here) into a tree. It
// reports problems instead of failing on the first where it can: syntax
// stops the parse, anything else (aliases, tags, duplicate keys, numbers
// JSON cannot carry) is reported and the value dropped.
func parseTree(data []byte) (*tree, []Problem) {
	data, shifts := jsonSlashes(data)
	t := &tree{at: map[string]pos{}, key: map[string]pos{}, refused: map[string]bool{}, shifts: shifts}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []Problem{{Line: 1, Column: 1, Message: "the plan is empty"}}
		}
		return nil, []Problem{t.syntaxProblem(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p := t.nodePos(&extra)
		return nil, []Problem{{Line: p.line, Column: p.col, Message: "a plan file holds one YAML document; a second one starts here"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, []Problem{t.syntaxProblem(err)}
	}
	var ps []Problem
	if len(doc.Content) == 0 {
		return nil, []Problem{{Line: 1, Column: 1, Message: "the plan is empty"}}
	}
	t.root = t.convert(doc.Content[0], "", &ps)
	return t, ps
}

// parserProblems are the messages of yaml.v3's parser (parserc.go), as
// opposed to its scanner: for those it prints the 0-based line of the
// construct being parsed (or of the fault), so one is added.
var parserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected key", "did not find expected node content",
	"found duplicate %TAG directive", "found duplicate %YAML directive", "found incompatible YAML document",
	"found undefined tag handle",
}

func (t *tree) syntaxProblem(err error) Problem {
	msg := err.Error()
	line, col := 1, 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
			if slices.Contains(parserProblems, m[3]) {
				line++
			}
		}
		if m[2] != "" {
			col, _ = strconv.Atoi(m[2])
		}
		msg = m[3]
	}
	p := t.shift(pos{max(line, 1), max(col, 1)})
	return Problem{Line: p.line, Column: p.col, Message: "YAML syntax: " + msg}
}

func (t *tree) nodePos(n *yaml.Node) pos { return t.shift(pos{max(n.Line, 1), max(n.Column, 1)}) }

// shift maps a position in the text yaml.v3 read back to the file's.
func (t *tree) shift(p pos) pos {
	col := p.col
	for _, c := range t.shifts[p.line] {
		if c < col {
			p.col++
		}
	}
	return p
}

// jsonSlashes rewrites the JSON escape \/ (YAML 1.2 has it, yaml.v3 does
// not) to a plain /, in a document that is JSON (starts with '{'), inside
// strings only. It returns, per line, the columns of the rewritten text at
// which a byte was dropped, so positions map back to the file.
func jsonSlashes(data []byte) ([]byte, map[int][]int) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(data, []byte(`\/`)) {
		return data, nil
	}
	out := make([]byte, 0, len(data))
	shifts := map[int][]int{}
	line, col := 1, 1 // of the next byte written to out
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && c == '\\' && i+1 < len(data) && data[i+1] == '/':
			shifts[line] = append(shifts[line], col)
			c = '/'
			i++
		case inString && c == '\\' && i+1 < len(data):
			out = append(out, c)
			col++
			i++
			c = data[i]
		case c == '"':
			inString = !inString
		}
		out = append(out, c)
		col++
		if c == '\n' {
			line, col = line+1, 1
		}
	}
	return out, shifts
}

// convert turns node n at pointer ptr into a JSON value, recording
// positions and appending problems.
func (t *tree) convert(n *yaml.Node, ptr string, ps *[]Problem) any {
	t.at[ptr] = t.nodePos(n)
	bad := func(format string, args ...any) any {
		p := t.nodePos(n)
		*ps = append(*ps, Problem{Line: p.line, Column: p.col, Path: ptr, Message: fmt.Sprintf(format, args...)})
		t.refused[ptr] = true
		return nil
	}
	// Anchors and aliases would let one node stand at many pointers (and
	// an alias bomb expand without bound); a plan spells everything out.
	if n.Kind == yaml.AliasNode {
		return bad("YAML aliases (*%s) are not allowed in a plan: write the value out", n.Value)
	}
	if n.Anchor != "" {
		bad("YAML anchors (&%s) are not allowed in a plan", n.Anchor)
	}
	switch n.Kind {
	case yaml.MappingNode:
		if n.Tag != "!!map" {
			return bad("YAML tag %s is not allowed in a plan", n.Tag)
		}
		m := map[string]any{}
		first := map[string]pos{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := t.nodePos(k)
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				*ps = append(*ps, Problem{Line: kp.line, Column: kp.col, Path: ptr, Message: "a member name must be a plain string (no merge keys, sequences or mappings as keys)"})
				continue
			}
			name := k.Value
			sub := ptr + "/" + escapeToken(name)
			if p, dup := first[name]; dup {
				*ps = append(*ps, Problem{Line: kp.line, Column: kp.col, Path: sub, Message: fmt.Sprintf("duplicate member %q (first at line %d)", name, p.line)})
				continue
			}
			first[name] = kp
			t.key[sub] = kp
			m[name] = t.convert(v, sub, ps)
		}
		return m
	case yaml.SequenceNode:
		if n.Tag != "!!seq" {
			return bad("YAML tag %s is not allowed in a plan", n.Tag)
		}
		list := make([]any, len(n.Content))
		for i, c := range n.Content {
			list[i] = t.convert(c, ptr+"/"+strconv.Itoa(i), ps)
		}
		return list
	case yaml.ScalarNode:
		return t.scalar(n, bad)
	}
	return bad("unexpected YAML node")
}

// scalar converts a resolved scalar; a timestamp stays the text it was
// written as (the deadline member parses it itself).
func (t *tree) scalar(n *yaml.Node, bad func(string, ...any) any) any {
	switch n.Tag {
	case "!!str", "!!timestamp":
		return n.Value
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return bad("not a boolean: %q", n.Value)
		}
		return b
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return json.Number(strconv.FormatUint(u, 10))
		}
		return bad("integer %s is out of range", n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return bad("not a number: %q", n.Value)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return bad("%s is not a finite number", n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return bad("YAML tag %s is not allowed in a plan", n.Tag)
}

// escapeToken applies RFC 6901: "~" becomes "~0", "/" becomes "~1".
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
