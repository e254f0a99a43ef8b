package protocol

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

//go:embed schemas/*.schema.json schemas/payloads/*.schema.json schemas/events/*.schema.json
var schemaFiles embed.FS

// SchemaBaseURL is the prefix of every schema $id; a schema named n has the
// $id SchemaBaseURL + n + ".schema.json".
const SchemaBaseURL = "https://missionweaveprotocol.org/schemas/0.1/"

// SchemaNames lists the 22 normative schemas of spec 21, without the
// ".schema.json" suffix.
var SchemaNames = []string{
	"common", "websocket-frame", "command", "event", "agent-card",
	"presence-record", "mission", "group", "membership", "conversation",
	"message", "work-contract", "work-item", "artifact", "evidence", "lease",
	"approval", "context-package", "group-snapshot", "extension-profile",
	"first-admission-record", "error",
}

// Problem is one reason a document failed its schema.
type Problem struct {
	Code    Code   // SCHEMA_VALIDATION_FAILED or WORK_CONTRACT_INCOMPLETE
	Pointer string // RFC 6901 pointer into the document; "" is the root
	Message string
}

// ValidationError lists every problem found in one document, sorted by
// pointer. It unwraps to a *Error, so CodeOf and errors.As work on it.
type ValidationError struct {
	Schema   string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: document does not conform to %s.schema.json", e.Code(), e.Schema)
	for _, p := range e.Problems {
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(root)"
		}
		fmt.Fprintf(&b, "\n  %s: %s", ptr, p.Message)
	}
	return b.String()
}

// Code is WORK_CONTRACT_INCOMPLETE when any problem is a missing contract
// member (the more specific and actionable answer), else
// SCHEMA_VALIDATION_FAILED.
func (e *ValidationError) Code() Code {
	for _, p := range e.Problems {
		if p.Code == CodeWorkContractIncomplete {
			return p.Code
		}
	}
	return CodeSchemaValidationFailed
}

// ProtocolError converts e to the wire error: the first problem of the
// winning code gives message and pointer, every problem goes to details.
func (e *ValidationError) ProtocolError() *Error {
	if len(e.Problems) == 0 {
		return Errorf(CodeSchemaValidationFailed, "document does not conform to %s.schema.json", e.Schema)
	}
	code := e.Code()
	first := e.Problems[0]
	for _, p := range e.Problems {
		if p.Code == code {
			first = p
			break
		}
	}
	pe := Errorf(code, "%s.schema.json: %s", e.Schema, first.Message).At(first.Pointer)
	list := make([]any, len(e.Problems))
	for i, p := range e.Problems {
		list[i] = map[string]any{"code": string(p.Code), "pointer": p.Pointer, "message": p.Message}
	}
	pe.Details = map[string]any{"schema": e.Schema, "pointer": first.Pointer, "problems": list}
	return pe
}

// Unwrap lets errors.As(err, **Error) and CodeOf see the protocol error.
func (e *ValidationError) Unwrap() error { return e.ProtocolError() }

type schemaSet struct {
	byName map[string]*jsonschema.Schema
	// patterns maps a pattern of common.schema.json to its definition's
	// description, so a mismatch reads "not a valid time (...)".
	patterns map[string]string
	// described maps the location of every schema object that has a
	// description ("<$id>#<pointer>") to it, to explain anyOf failures.
	described map[string]string

	// Validating a command through command.schema.json evaluates one
	// if/then per Command type (38), which makes it about 2.5 times slower
	// than validating the same command without them (BenchmarkValidateCommand). Validate therefore uses, for the schemas that
	// embed a command, a derived copy without that dispatch (split) and
	// checks the payload against payloads[type] itself. The problems are
	// the same as the normative schema's (schema_test.go proves it).
	split    map[string]*jsonschema.Schema
	payloads map[string]*jsonschema.Schema
}

// splitDerivations derive the dispatch-free schemas: each names the source
// file, the derived $id and the edit that removes the dispatch.
var splitDerivations = []struct {
	name, file, id string
	edit           func(doc map[string]any) bool
}{
	{"command", "command.schema.json", "internal/command-envelope.schema.json", func(doc map[string]any) bool {
		_, ok := doc["allOf"]
		delete(doc, "allOf")
		return ok
	}},
	{"websocket-frame", "websocket-frame.schema.json", "internal/websocket-frame.schema.json", func(doc map[string]any) bool {
		defs, _ := doc["$defs"].(map[string]any)
		cmd, _ := defs["command"].(map[string]any)
		props, _ := cmd["properties"].(map[string]any)
		ref, _ := props["command"].(map[string]any)
		if ref["$ref"] != "command.schema.json" {
			return false
		}
		ref["$ref"] = "command-envelope.schema.json"
		return true
	}},
}

var (
	schemasOnce sync.Once
	schemas     *schemaSet
	schemasErr  error
)

// loadSchemas compiles every embedded schema once; the compiler never
// touches the network (all $refs resolve to embedded resources).
func loadSchemas() (*schemaSet, error) {
	schemasOnce.Do(func() { schemas, schemasErr = compileSchemas() })
	return schemas, schemasErr
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s is not embedded (no network loading)", url)
}

func compileSchemas() (*schemaSet, error) {
	set := &schemaSet{
		byName: map[string]*jsonschema.Schema{}, patterns: map[string]string{}, described: map[string]string{},
		split: map[string]*jsonschema.Schema{}, payloads: map[string]*jsonschema.Schema{},
	}
	c, err := newSchemaCompiler(set.patterns, set.described)
	if err != nil {
		return nil, err
	}
	for _, n := range SchemaNames {
		s, err := c.Compile(SchemaBaseURL + n + ".schema.json")
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", n, err)
		}
		set.byName[n] = s
	}
	payloadFiles, err := fs.Glob(schemaFiles, "schemas/payloads/*.schema.json")
	if err != nil {
		return nil, err
	}
	for _, p := range payloadFiles {
		typ := strings.TrimSuffix(path.Base(p), ".schema.json")
		if set.payloads[typ], err = c.Compile(SchemaBaseURL + "payloads/" + typ + ".schema.json"); err != nil {
			return nil, fmt.Errorf("compile payload %s: %w", typ, err)
		}
	}
	// The derived $ids sit one folder down, so relative $refs to sibling
	// files are rewritten by resolving against the original location.
	for _, d := range splitDerivations {
		data, err := schemaFiles.ReadFile("schemas/" + d.file)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		m := doc.(map[string]any)
		if !d.edit(m) {
			return nil, fmt.Errorf("%s: the payload dispatch to remove is not where expected", d.file)
		}
		rebaseRefs(m, "../")
		m["$id"] = SchemaBaseURL + d.id
		collectDescriptions(m, SchemaBaseURL+d.id+"#", set.described)
		if err := c.AddResource(SchemaBaseURL+d.id, m); err != nil {
			return nil, err
		}
	}
	for _, d := range splitDerivations {
		if set.split[d.name], err = c.Compile(SchemaBaseURL + d.id); err != nil {
			return nil, fmt.Errorf("compile derived %s: %w", d.id, err)
		}
	}
	return set, nil
}

// rebaseRefs prefixes every relative file $ref (not "#..." ones, and not
// the derived command envelope, which lives beside its user) with up.
func rebaseRefs(v any, up string) {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok && !strings.HasPrefix(r, "#") && r != "command-envelope.schema.json" {
			v["$ref"] = up + r
		}
		for _, c := range v {
			rebaseRefs(c, up)
		}
	case []any:
		for _, c := range v {
			rebaseRefs(c, up)
		}
	}
}

// newSchemaCompiler returns a compiler holding every embedded schema file
// as a resource, and fills patterns and described (see schemaSet).
func newSchemaCompiler(patterns, described map[string]string) (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	err := fs.WalkDir(schemaFiles, "schemas", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := schemaFiles.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		id := SchemaBaseURL + strings.TrimPrefix(p, "schemas/")
		if m, ok := doc.(map[string]any); !ok || m["$id"] != id {
			return fmt.Errorf("%s: $id must be %s", p, id)
		}
		if p == "schemas/common.schema.json" {
			collectPatterns(doc, patterns)
		}
		collectDescriptions(doc, id+"#", described)
		return c.AddResource(id, doc)
	})
	return c, err
}

func collectPatterns(doc any, out map[string]string) {
	defs, _ := doc.(map[string]any)["$defs"].(map[string]any)
	for name, d := range defs {
		m, _ := d.(map[string]any)
		if pat, ok := m["pattern"].(string); ok {
			desc, _ := m["description"].(string)
			out[pat] = fmt.Sprintf("not a valid %s (%s)", name, desc)
		}
	}
}

func collectDescriptions(v any, loc string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if d, ok := v["description"].(string); ok {
			out[loc] = d
		}
		for k, c := range v {
			collectDescriptions(c, loc+"/"+escapePointerToken(k), out)
		}
	case []any:
		for i, c := range v {
			collectDescriptions(c, loc+"/"+strconv.Itoa(i), out)
		}
	}
}

// Validate checks v against the named schema (one of SchemaNames). v must be
// a decoded JSON value: map[string]any, []any, string, json.Number (or a Go
// number), bool or nil, as Parse returns. It returns nil, a
// *ValidationError, or a *Error (SCHEMA_VALIDATION_FAILED for an unknown
// name). "common" holds only definitions and accepts any value.
func Validate(name string, v any) error {
	set, err := loadSchemas()
	if err != nil {
		return Errorf(CodeInternalError, "schemas: %v", err)
	}
	s, ok := set.byName[name]
	if !ok {
		return Errorf(CodeSchemaValidationFailed, "unknown schema %q (known: %s)", name, strings.Join(SchemaNames, ", "))
	}
	// Accept path (fastschema.go): a document the fast validator finds
	// certainly valid is; anything else gets the library's full report.
	if fastAccepts(name, v) {
		return nil
	}
	if sp, ok := set.split[name]; ok {
		return set.checkSplit(name, sp, v)
	}
	return set.check(name, s, v)
}

// check validates v against s and maps the failure to problems.
func (set *schemaSet) check(name string, s *jsonschema.Schema, v any) error {
	var ps []Problem
	if err := set.run(s, v, "", &ps); err != nil {
		return Errorf(CodeInternalError, "validate %s: %v", name, err)
	}
	return result(name, ps)
}

// checkSplit validates v against a dispatch-free schema, then the embedded
// command's payload against its type's payload schema, under the same
// condition as the normative if/then: the type is exactly a known one.
func (set *schemaSet) checkSplit(name string, s *jsonschema.Schema, v any) error {
	var ps []Problem
	if err := set.run(s, v, "", &ps); err != nil {
		return Errorf(CodeInternalError, "validate %s: %v", name, err)
	}
	cmd, at := embeddedCommand(name, v)
	if typ, ok := cmd["type"].(string); ok {
		payload, present := cmd["payload"]
		if ps2, known := set.payloads[typ]; known && present {
			if err := set.run(ps2, payload, at+"/payload", &ps); err != nil {
				return Errorf(CodeInternalError, "validate %s payload: %v", typ, err)
			}
		}
	}
	return result(name, ps)
}

// embeddedCommand finds the command a document of schema name carries and
// its pointer: the document itself, or a COMMAND frame's "command".
func embeddedCommand(name string, v any) (map[string]any, string) {
	m, _ := v.(map[string]any)
	if name == "command" {
		return m, ""
	}
	if m["type"] == string(FrameCommand) {
		cmd, _ := m["command"].(map[string]any)
		return cmd, "/command"
	}
	return nil, ""
}

// run validates v against s and appends its problems, with pointers
// prefixed by base. It fails only when the validator fails unexpectedly.
func (set *schemaSet) run(s *jsonschema.Schema, v any, base string, out *[]Problem) error {
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	start := len(*out)
	set.collect(verr, out, false, "", v)
	if len(*out) == start {
		// Every failing node yields a problem; keep a fallback for safety.
		*out = append(*out, Problem{Code: CodeSchemaValidationFailed, Message: verr.Error()})
	}
	for i := start; i < len(*out); i++ {
		(*out)[i].Pointer = base + (*out)[i].Pointer
	}
	return nil
}

func result(name string, ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	sortProblems(&ps)
	return &ValidationError{Schema: name, Problems: ps}
}

func sortProblems(ps *[]Problem) {
	list := *ps
	sort.Slice(list, func(i, j int) bool {
		if list[i].Pointer != list[j].Pointer {
			return list[i].Pointer < list[j].Pointer
		}
		return list[i].Message < list[j].Message
	})
	// The same failure can arrive through two paths (a base keyword and a
	// per-type $ref); report it once.
	out := list[:0]
	for i, p := range list {
		if i > 0 && p == list[i-1] {
			continue
		}
		out = append(out, p)
	}
	*ps = out
}

var (
	maxSafeInt   = new(big.Rat).SetInt64(1<<53 - 1)
	contractBase = SchemaBaseURL + "work-contract.schema.json"
)

// collect flattens the error tree to its leaves. inContract is set below
// any node evaluated by work-contract.schema.json: there a missing member,
// an empty required list, object or text is missing contract information
// (spec 10.1), WORK_CONTRACT_INCOMPLETE.
//
// parent is the pointer of the enclosing node: jsonschema v6.0.3 stores an
// aliased, later-overwritten InstanceLocation on propertyNames errors
// (validator.go:296), while their parent node sits on the object itself.
func (set *schemaSet) collect(e *jsonschema.ValidationError, out *[]Problem, inContract bool, parent string, doc any) {
	inContract = inContract || strings.HasPrefix(e.SchemaURL, contractBase)
	ptr := instancePointer(e.InstanceLocation)
	add := func(p, msg string) {
		*out = append(*out, Problem{Code: CodeSchemaValidationFailed, Pointer: p, Message: msg})
	}
	incomplete := CodeSchemaValidationFailed
	if inContract {
		incomplete = CodeWorkContractIncomplete
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		if len(e.Causes) == 0 {
			add(ptr, set.leafMessage(e))
		}
		for _, c := range e.Causes {
			set.collect(c, out, inContract, ptr, doc)
		}
	case *kind.AnyOf:
		add(ptr, set.noAlternative(e, doc))
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			add(ptr, set.noAlternative(e, doc))
		} else {
			add(ptr, fmt.Sprintf("matches more than one allowed form (%d and %d)", k.Subschemas[0], k.Subschemas[1]))
		}
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Problem{Code: incomplete, Pointer: ptr, Message: fmt.Sprintf("missing required member %q", m)})
		}
	case *kind.MinItems, *kind.MinLength, *kind.MinProperties:
		*out = append(*out, Problem{Code: incomplete, Pointer: ptr, Message: set.leafMessage(e)})
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			add(ptr+"/"+escapePointerToken(p), fmt.Sprintf("unknown member %q (additionalProperties false)", p))
		}
	case *kind.PropertyNames:
		msg := fmt.Sprintf("invalid member name %q", k.Property)
		if len(e.Causes) > 0 {
			msg += ": " + set.alternatives(e, doc)
		}
		add(parent+"/"+escapePointerToken(k.Property), msg)
	default:
		add(ptr, set.leafMessage(e))
	}
}

// alternatives joins the leaf messages under e (the branches of an
// anyOf/oneOf, or the reasons a member name was refused).
func (set *schemaSet) alternatives(e *jsonschema.ValidationError, doc any) string {
	var leaves []Problem
	for _, c := range e.Causes {
		set.collect(c, &leaves, false, instancePointer(e.InstanceLocation), doc)
	}
	sortProblems(&leaves)
	msgs := make([]string, len(leaves))
	for i, l := range leaves {
		msgs[i] = l.Message
	}
	return strings.Join(msgs, "; or ")
}

// noAlternative explains an anyOf/oneOf that nothing matched, preferring
// the schema's own description ("a core Command type ... or an ext...
// type") over the list of every branch's complaint.
func (set *schemaSet) noAlternative(e *jsonschema.ValidationError, doc any) string {
	if d, ok := set.described[e.SchemaURL]; ok {
		if v, ok := valueAt(doc, e.InstanceLocation); ok {
			return fmt.Sprintf("value %s is not %s", displayValue(v), d)
		}
		return "value is not " + d
	}
	return "matches none of the allowed forms: " + set.alternatives(e, doc)
}

func valueAt(doc any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch c := doc.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			doc = c[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

func (set *schemaSet) leafMessage(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return fmt.Sprintf("wrong type: got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Pattern:
		if desc, ok := set.patterns[k.Want]; ok {
			return fmt.Sprintf("%q is %s", k.Got, desc)
		}
		return fmt.Sprintf("%q does not match pattern %s", k.Got, k.Want)
	case *kind.Enum:
		const shown = 12
		var want []string
		for i, w := range k.Want {
			if i == shown {
				want = append(want, fmt.Sprintf("... (%d values)", len(k.Want)))
				break
			}
			want = append(want, displayValue(w))
		}
		return fmt.Sprintf("value %s is not allowed: must be one of %s", displayValue(k.Got), strings.Join(want, ", "))
	case *kind.Const:
		return fmt.Sprintf("value %s is not allowed: must be %s", displayValue(k.Got), displayValue(k.Want))
	case *kind.Maximum:
		if k.Want.Cmp(maxSafeInt) == 0 {
			return fmt.Sprintf("value %s exceeds 2^53-1", ratText(k.Got))
		}
		return fmt.Sprintf("value %s exceeds the maximum %s", ratText(k.Got), ratText(k.Want))
	case *kind.Minimum:
		return fmt.Sprintf("value %s is below the minimum %s", ratText(k.Got), ratText(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("value %s must be greater than %s", ratText(k.Got), ratText(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("value %s must be less than %s", ratText(k.Got), ratText(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("value %s is not a multiple of %s", ratText(k.Got), ratText(k.Want))
	case *kind.MinItems:
		return fmt.Sprintf("array has %d items, at least %d required", k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("array has %d items, at most %d allowed", k.Got, k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.MaxLength:
		return fmt.Sprintf("string has %d characters, at most %d allowed", k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("object has %d members, at most %d allowed", k.Got, k.Want)
	case *kind.Not:
		return "value has a form that is not allowed here"
	case *kind.MinLength:
		if k.Want == 1 {
			return "string must not be empty"
		}
		return fmt.Sprintf("string has %d characters, at least %d required", k.Got, k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("object has %d members, at least %d required", k.Got, k.Want)
	case *kind.FalseSchema:
		name := "this member"
		if n := len(e.InstanceLocation); n > 0 {
			name = strconv.Quote(e.InstanceLocation[n-1])
		}
		return fmt.Sprintf("member %s is not allowed here", name)
	case *kind.DependentRequired:
		return fmt.Sprintf("member %q requires member(s) %s", k.Prop, quoteNames(k.Missing))
	}
	if kw := e.ErrorKind.KeywordPath(); len(kw) > 0 {
		return fmt.Sprintf("fails the %q keyword", strings.Join(kw, "/"))
	}
	return "value does not conform"
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

func displayValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "(object)"
	case []any:
		return "(array)"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func instancePointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointerToken(t))
	}
	return b.String()
}

// escapePointerToken applies RFC 6901: "~" → "~0", "/" → "~1".
func escapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// detectRules recognize a schema by top-level members that only documents
// of that schema have together; at most one rule matches a valid document.
var detectRules = []struct {
	schema string
	match  func(m map[string]any) bool
}{
	{"websocket-frame", func(m map[string]any) bool { return hasMembers(m, "type", "frameId") }},
	{"command", func(m map[string]any) bool { return hasMembers(m, "actionId", "type", "payload") }},
	{"event", func(m map[string]any) bool { return hasMembers(m, "eventId", "type", "payload") }},
	{"error", func(m map[string]any) bool { return hasMembers(m, "code", "retryable") }},
	{"work-contract", func(m map[string]any) bool { return hasMembers(m, "contractId") }},
	{"work-item", func(m map[string]any) bool { return hasMembers(m, "workItemId", "contract") }},
	{"lease", func(m map[string]any) bool {
		return hasMembers(m, "leaseId", "expiresAt") || hasMembers(m, "ownerAgentId", "ownershipEpoch")
	}},
	{"artifact", func(m map[string]any) bool { return hasMembers(m, "contentHash", "mediaType") }},
	{"evidence", func(m map[string]any) bool { return hasMembers(m, "subject", "criteria", "method") }},
	{"group-snapshot", func(m map[string]any) bool { return hasMembers(m, "snapshotId", "policyLogDigest") }},
	{"context-package", func(m map[string]any) bool { return hasMembers(m, "packageId", "sourceEvents") }},
	{"extension-profile", func(m map[string]any) bool { return hasMembers(m, "schemaUri", "schemaHash") }},
	{"first-admission-record", func(m map[string]any) bool { return hasMembers(m, "recordId", "agentCardHash") }},
	{"agent-card", func(m map[string]any) bool { return hasMembers(m, "agentId", "keys", "capabilities") }},
	{"presence-record", func(m map[string]any) bool { return hasMembers(m, "agentId", "capacityState", "observedAt") }},
	{"approval", func(m map[string]any) bool { return hasMembers(m, "approvalId", "decision") }},
	{"message", func(m map[string]any) bool { return hasMembers(m, "messageId", "conversationId") }},
	{"conversation", func(m map[string]any) bool { return hasMembers(m, "conversationId", "subject") }},
	{"membership", func(m map[string]any) bool { return hasMembers(m, "principal", "membershipEpoch") }},
	{"mission", func(m map[string]any) bool { return hasMembers(m, "missionId", "objective") }},
	{"group", func(m map[string]any) bool { return hasMembers(m, "groupId", "organizationId", "lastSequence") }},
}

func hasMembers(m map[string]any, names ...string) bool {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	return true
}

// DetectSchema names the schema a document claims to follow, judged by its
// top-level members. A document that is not an object, that no schema
// recognizes, or that fits more than one is SCHEMA_VALIDATION_FAILED.
// Detection does not validate: call Validate next.
func DetectSchema(v any) (string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", Errorf(CodeSchemaValidationFailed, "cannot detect the schema: the document is %s, not an object", jsonKindOf(v))
	}
	var found []string
	for _, r := range detectRules {
		if r.match(m) {
			found = append(found, r.schema)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
	default:
		return "", Errorf(CodeSchemaValidationFailed,
			"cannot detect the schema: the members fit %s; name the schema explicitly", strings.Join(found, " and "))
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return "", Errorf(CodeSchemaValidationFailed,
		"cannot detect the schema from members [%s]; name it explicitly (one of %s)",
		strings.Join(names, ", "), strings.Join(SchemaNames[1:], ", "))
}

func jsonKindOf(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// SchemaFS returns the embedded schema files, rooted at the schemas folder
// ("command.schema.json", "payloads/work.offer.schema.json", ...), for tools
// that print or export them.
func SchemaFS() fs.FS {
	sub, err := fs.Sub(schemaFiles, "schemas")
	if err != nil {
		panic(err) // unreachable: "schemas" is a valid embedded directory
	}
	return sub
}
