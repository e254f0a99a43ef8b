package plan

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Schema is the JSON Schema (2020-12) of a plan file, docs/plans.md in
// machine form. Parse validates every plan against it.
//
//go:embed plan.schema.json
var Schema []byte

// SchemaID is the $id of Schema.
const SchemaID = "https://github.com/missionweave/mwp-worker/plan/plan.schema.json"

type compiled struct {
	schema *jsonschema.Schema
	// described maps "<$id>#<pointer>" of every schema object with a
	// description to it, so an anyOf that nothing matched reads as what
	// was wanted rather than every branch's complaint.
	described map[string]string
}

var loadSchema = sync.OnceValues(func() (*compiled, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(SchemaID, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		return nil, err
	}
	out := &compiled{schema: s, described: map[string]string{}}
	describe(doc, SchemaID+"#", out.described)
	return out, nil
})

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s is not embedded (no network loading)", url)
}

func describe(v any, loc string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if d, ok := v["description"].(string); ok {
			out[loc] = d
		}
		for k, c := range v {
			describe(c, loc+"/"+escapeToken(k), out)
		}
	case []any:
		for i, c := range v {
			describe(c, loc+"/"+strconv.Itoa(i), out)
		}
	}
}

// validate checks t against the plan schema and returns one problem per
// failing leaf, placed on the line of the value (or member key) at fault.
func validate(t *tree) ([]Problem, error) {
	c, err := loadSchema()
	if err != nil {
		return nil, fmt.Errorf("plan schema: %w", err)
	}
	err = c.schema.Validate(t.root)
	if err == nil {
		return nil, nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return nil, err
	}
	var ps []Problem
	c.collect(verr, t, &ps)
	return ps, nil
}

func (c *compiled) collect(e *jsonschema.ValidationError, t *tree, out *[]Problem) {
	ptr := pointer(e.InstanceLocation)
	add := func(p string, key bool, msg string) {
		w := t.where(p, key)
		*out = append(*out, Problem{Line: w.line, Column: w.col, Path: p, Message: msg})
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		if len(e.Causes) == 0 {
			add(ptr, false, leafMessage(e))
		}
		for _, sub := range e.Causes {
			c.collect(sub, t, out)
		}
	case *kind.AnyOf, *kind.OneOf:
		// When the value's type fits one form only ({stage, policy} for
		// an object), that form's complaints are the useful ones.
		var fit []*jsonschema.ValidationError
		for _, sub := range e.Causes {
			if !typeMismatch(sub, ptr) {
				fit = append(fit, sub)
			}
		}
		if len(fit) == 1 {
			c.collect(fit[0], t, out)
			return
		}
		if d, ok := c.described[e.SchemaURL]; ok {
			add(ptr, false, fmt.Sprintf("%s is not %s", display(valueAt(t.root, e.InstanceLocation)), d))
			return
		}
		add(ptr, false, "matches none of the allowed forms")
	case *kind.Required:
		for _, m := range k.Missing {
			add(ptr, false, fmt.Sprintf("missing required member %q", m))
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			add(ptr+"/"+escapeToken(p), true, fmt.Sprintf("unknown member %q", p))
		}
	default:
		add(ptr, false, leafMessage(e))
	}
}

// typeMismatch reports whether e (one form of an anyOf) failed only on the
// type of the value at ptr itself.
func typeMismatch(e *jsonschema.ValidationError, ptr string) bool {
	if _, ok := e.ErrorKind.(*kind.Type); ok {
		return pointer(e.InstanceLocation) == ptr
	}
	if len(e.Causes) != 1 {
		return false
	}
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		return typeMismatch(e.Causes[0], ptr)
	}
	return false
}

func leafMessage(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return fmt.Sprintf("wrong type: got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Pattern:
		return fmt.Sprintf("%q does not match %s", k.Got, k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		return fmt.Sprintf("%s is not allowed: must be one of %s", display(k.Got), strings.Join(want, ", "))
	case *kind.Const:
		return fmt.Sprintf("%s is not allowed: must be %s", display(k.Got), display(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s exceeds the maximum %s", rat(k.Got), rat(k.Want))
	case *kind.Minimum:
		return fmt.Sprintf("%s is below the minimum %s", rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be greater than %s", rat(k.Got), rat(k.Want))
	case *kind.MinItems:
		return fmt.Sprintf("has %d items, at least %d required", k.Got, k.Want)
	case *kind.MinLength:
		return "must not be empty"
	case *kind.MinProperties:
		return fmt.Sprintf("needs at least %d member", k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	}
	return e.Error()
}

func rat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func display(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprint(v)
}

func valueAt(root any, tokens []string) any {
	v := root
	for _, tok := range tokens {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}
