package group

// The generator of the event payload schemas and of docs/events.md. The Go
// payload types of Events are the one description of every event payload:
// this file derives from them, by reflection,
//
//   - protocol/schemas/events/<event type>.schema.json, one per event type;
//   - protocol/schemas/events/defs.schema.json, the protocol types nested in
//     payloads that have no schema of their own yet;
//   - the allOf of protocol/schemas/event.schema.json, which checks each
//     type's payload and aggregate kind (the rest of that file is written
//     by hand);
//   - docs/events.md, the reference of every event type.
//
// TestEventSchemas fails when a checked-in file differs from what the Go
// types generate; `go test ./group -run TestEventSchemas -update` rewrites
// them. It lives in a test of package group because it needs Events and
// the payload types, and nothing outside tests should carry it: the
// binary embeds the generated files, not the generator.
//
// Rules. A member's name is its json tag; a member without omitempty or
// omitzero is required; group structs are closed objects
// (additionalProperties false) with embedded structs flattened, as
// encoding/json does. A protocol type with a schema of its own is a $ref
// to it (esProtocolSchemas), so one shape has one schema; a protocol struct
// without one is generated into defs.schema.json. protocol string types
// with constants (WorkItemState, MissionState, ...) are enums: a $ref to
// the existing enum where one exists (esEnumSchemas; TestEventSchemaEnums
// checks it lists exactly the constants), else the constants inline.
// Strings are refined by member name: *Id and a few others are ids,
// *Hash, *Digest and artifacts digests, anything else non-empty text;
// unsigned integers named *Epoch are epochs, contract revisions and
// omitempty integers (Go never writes their zero) are at least 1.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

var eventSchemasUpdate = flag.Bool("update", false, "rewrite the generated event schemas and docs/events.md")

// Where the generated files live, relative to this package.
const (
	esSchemaDir = "../protocol/schemas"
	esDocsFile  = "../docs/events.md"
)

// esProtocolSchemas maps the protocol types that already have a schema to
// its location (relative to protocol/schemas). TestEventSchemaRefs checks
// that each location describes exactly the type's members.
var esProtocolSchemas = map[reflect.Type]string{
	reflect.TypeFor[protocol.Time]():                     "common.schema.json#/$defs/time",
	reflect.TypeFor[protocol.Actor]():                    "common.schema.json#/$defs/actor",
	reflect.TypeFor[protocol.Signature]():                "common.schema.json#/$defs/signature",
	reflect.TypeFor[protocol.Budgets]():                  "common.schema.json#/$defs/budgets",
	reflect.TypeFor[protocol.Usage]():                    "common.schema.json#/$defs/usage",
	reflect.TypeFor[protocol.Progress]():                 "common.schema.json#/$defs/progress",
	reflect.TypeFor[protocol.ScheduleDisclosure]():       "common.schema.json#/$defs/scheduleDisclosure",
	reflect.TypeFor[protocol.Resolution]():               "common.schema.json#/$defs/resolution",
	reflect.TypeFor[protocol.Dependency]():               "common.schema.json#/$defs/dependency",
	reflect.TypeFor[protocol.SnapshotRef]():              "common.schema.json#/$defs/snapshotRef",
	reflect.TypeFor[protocol.Mission]():                  "mission.schema.json",
	reflect.TypeFor[protocol.CoordinatorLease]():         "mission.schema.json#/properties/coordinator",
	reflect.TypeFor[protocol.ParentLink]():               "mission.schema.json#/properties/parent",
	reflect.TypeFor[protocol.WorkContract]():             "work-contract.schema.json",
	reflect.TypeFor[protocol.CheckpointRef]():            "work-item.schema.json#/properties/checkpoint",
	reflect.TypeFor[protocol.OfferCandidate]():           "payloads/work.offer.schema.json#/properties/candidates/items",
	reflect.TypeFor[protocol.OwnershipGrant]():           "lease.schema.json#/$defs/ownershipGrant",
	reflect.TypeFor[protocol.ExecutionLease]():           "lease.schema.json#/$defs/executionLease",
	reflect.TypeFor[protocol.Evidence]():                 "evidence.schema.json",
	reflect.TypeFor[protocol.Approval]():                 "approval.schema.json",
	reflect.TypeFor[protocol.Membership]():               "membership.schema.json",
	reflect.TypeFor[protocol.ArtifactManifest]():         "artifact.schema.json",
	reflect.TypeFor[protocol.AgentCard]():                "agent-card.schema.json",
	reflect.TypeFor[protocol.CooperationOverrideGrant](): "payloads/policy.grant_cooperation_override.schema.json",
	reflect.TypeFor[protocol.OpenSessionPayload]():       "payloads/ext.missionweaveprotocol.identity.session_open.schema.json",
	reflect.TypeFor[protocol.ContextPackage]():           "context-package.schema.json",
}

// esEnumSchemas maps the protocol string types whose values an existing
// schema already lists to that enum.
var esEnumSchemas = map[reflect.Type]string{
	reflect.TypeFor[protocol.MissionState]():       "mission.schema.json#/properties/state",
	reflect.TypeFor[protocol.WorkItemState]():      "work-item.schema.json#/properties/state",
	reflect.TypeFor[protocol.ChildFailurePolicy](): "mission.schema.json#/properties/parent/properties/onChildFailure",
	reflect.TypeFor[protocol.CheckpointReason]():   "payloads/work.checkpoint.schema.json#/properties/reason",
	reflect.TypeFor[protocol.MessageState]():       "message.schema.json#/properties/state",
}

// esMemberAs reads a plain-string member as a protocol enum type: the
// payload type spells it string, the values are that type's.
var esMemberAs = map[string]reflect.Type{
	"MessageEvent.state": reflect.TypeFor[protocol.MessageState](),
}

// esMemberSchemas gives members whose shape an existing schema defines
// although their Go type is a plain string.
var esMemberSchemas = map[string]string{
	"MessageEvent.mediaType": "message.schema.json#/properties/mediaType",
}

// esMemberConst fixes a member to one value. work.proposed carries the
// proposal's state, protocol.WorkProposed, which no WorkItem ever has
// (protocol.WorkItemState.Known is false for it).
var esMemberConst = map[string]string{
	"Proposed.state": string(protocol.WorkProposed),
}

// String members that are ids or digests although their names do not say so.
var (
	esIDMembers     = map[string]bool{"followUpOf": true, "replyTo": true, "ancestors": true, "unfinishedWorkItems": true}
	esDigestMembers = map[string]bool{"artifacts": true, "digest": true}
	esPositiveUints = map[string]bool{"contractRevision": true, "previousContractRevision": true}
)

// esGlossary gives the one-line meaning of members that have no Go doc
// comment (keyed "Type.member" or, for every type, "member"). A field's
// own doc comment always wins; the doc comment of the field's named type
// comes after this list. Prefer adding a doc comment to the field.
var esGlossary = map[string]string{
	"missionId":                      "the Mission",
	"MissionRef.state":               "the Mission's state after the event",
	"workItemId":                     "the WorkItem",
	"WorkRef.state":                  "the WorkItem's state after the event",
	"groupId":                        "the Group",
	"agentId":                        "the agent",
	"MissionCreated.budgets":         "the Mission's budgets",
	"ancestors":                      "the Mission ids from the root down to the parent",
	"followUpOf":                     "the Mission this one follows up",
	"previousCoordinatorEpoch":       "the coordinator epoch this assignment fences",
	"summary":                        "what is submitted or proposed",
	"artifacts":                      "digests of the Artifacts it names",
	"evidence":                       "Evidence records (spec 13.2)",
	"ResultAccepted.evidence":        "the reviewer's Evidence records",
	"approvalId":                     "the Approval",
	"approver":                       "who approved",
	"comment":                        "free-text comment",
	"changes":                        "the changes requested",
	"reason":                         "why",
	"Progressed.reason":              "why, when not progress: session_replaced for a lease revoked by a replaced session",
	"SnapshotCreated.reason":         "retention or archive",
	"unfinishedWorkItems":            "the WorkItems the closure ended (their events follow)",
	"ChildCreated.budgets":           "the child Mission's budgets",
	"parentWorkItemId":               "the parent WorkItem",
	"childMissionId":                 "the linked child Mission",
	"childGroupId":                   "the child Mission's Group",
	"title":                          "the Mission's title",
	"objective":                      "the Mission's objective",
	"proposalId":                     "the work proposal",
	"proposer":                       "who proposed the work",
	"Proposed.state":                 "always proposed: a proposal is not yet a WorkItem",
	"contractRevision":               "the contract revision",
	"previousContractRevision":       "the contract revision this one replaces",
	"offerId":                        "the offer",
	"offerExpiresAt":                 "when the offer lapses",
	"startWithinMs":                  "how soon after acceptance the owner must start, in milliseconds",
	"renewedAcceptance":              "the owner accepted a revised contract again (ownership unchanged)",
	"resumeFromCheckpointId":         "the checkpoint execution resumes from",
	"leaseId":                        "the execution lease",
	"Progressed.lease":               "the renewed lease (lease renewals only)",
	"resolution":                     "how the blocker was resolved",
	"Unblocked.fencedOwnershipEpoch": "the lapsed ownership the unblock fenced",
	"childApprovalId":                "the child Mission's approval that verified this WorkItem",
	"messageId":                      "the Message",
	"conversationId":                 "the Message's Conversation",
	"author":                         "who wrote the Message",
	"text":                           "the Message text (posted or corrected)",
	"mediaType":                      "the text's media type",
	"replyTo":                        "the Message this one answers",
	"MessageEvent.state":             "the Message's state after the event",
	"grantId":                        "the cooperation-override grant",
	"policy":                         "the cooperation policy the grant overrides",
	"consumedByActionId":             "the actionId of the command that spent the grant",
	"targetCommandType":              "the Command type the grant is for",
	"ownershipEpoch":                 "the ownership epoch",
	"UsageRecorded.ownershipEpoch":   "the ownership the usage was incurred under",
	"usageDelta":                     "the usage this record adds",
	"usedTotal":                      "the WorkItem's running usage total",
	"reconcilingSessionEpoch":        "the session that reported the usage (equal to historicalSessionEpoch when online)",
	"agentCardHash":                  "digest of the Agent Card's JCS bytes",
	"sessionEpoch":                   "the new session epoch",

	"Membership.principal":       "the member",
	"Membership.roles":           "the member's roles",
	"Membership.membershipEpoch": "fences commands made under an earlier membership",
	"Membership.state":           "the membership's state after the event",
	"Membership.joinedAt":        "when the principal joined",
	"Membership.endedAt":         "when the membership ended",
	"Membership.delegations":     "the delegations the member granted",
	"Membership.revision":        "the membership's revision",

	"CooperationOverrideGrant.missionId":      "the Mission the grant binds",
	"CooperationOverrideGrant.groupId":        "the Group the grant binds",
	"CooperationOverrideGrant.grantee":        "who may use the grant",
	"CooperationOverrideGrant.targetActionId": "the actionId of the one command that may use it",
	"CooperationOverrideGrant.reason":         "why the limit is lifted",
	"CooperationOverrideGrant.approver":       "who approved the grant",
	"CooperationOverrideGrant.grantedAt":      "when it was granted",
	"CooperationOverrideGrant.expiresAt":      "when it lapses unused",

	"CapabilityToken.tokenId":           "the token",
	"CapabilityToken.leaseId":           "the execution lease it is bound to",
	"CapabilityToken.agentId":           "the agent that may use it",
	"CapabilityToken.workItemId":        "the WorkItem",
	"CapabilityToken.ownershipEpoch":    "the ownership it was issued under",
	"CapabilityToken.allowedTools":      "the tools the contract allows",
	"CapabilityToken.allowedOperations": "the operations the contract allows",
	"CapabilityToken.allowedData":       "the data the contract allows",
	"CapabilityToken.issuedAt":          "when it was issued",
	"CapabilityToken.expiresAt":         "when it lapses, never after the lease",
	"CapabilityToken.signature":         "the Group Authority's signature",
}

// esObj is a JSON object that keeps its members in order.
type esObj struct {
	keys []string
	vals []any
}

func esO(kv ...any) *esObj {
	o := &esObj{}
	for i := 0; i < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *esObj) set(k string, v any) {
	if i := slices.Index(o.keys, k); i >= 0 {
		o.vals[i] = v
		return
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *esObj) get(k string) (any, bool) {
	if i := slices.Index(o.keys, k); i >= 0 {
		return o.vals[i], true
	}
	return nil, false
}

func (o *esObj) str(k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

// esGoDocs holds the Go doc comments of a package's types and fields.
type esGoDocs struct {
	types  map[string]string   // type name → doc
	fields map[string]string   // "Type.Field" → doc
	consts map[string][]string // type name → its string constants, in source order
}

func esParseDocs(dir string) (*esGoDocs, error) {
	d := &esGoDocs{types: map[string]string{}, fields: map[string]string{}, consts: map[string][]string{}}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					doc := s.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					d.types[s.Name.Name] = esCommentText(doc)
					st, ok := s.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						c := esCommentText(fl.Doc)
						if c == "" {
							c = esCommentText(fl.Comment)
						}
						for _, n := range fl.Names {
							d.fields[s.Name.Name+"."+n.Name] = c
						}
					}
				case *ast.ValueSpec:
					id, ok := s.Type.(*ast.Ident)
					if gd.Tok != token.CONST || !ok {
						continue
					}
					for _, v := range s.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if val, err := strconv.Unquote(lit.Value); err == nil {
								d.consts[id.Name] = append(d.consts[id.Name], val)
							}
						}
					}
				}
			}
		}
	}
	return d, nil
}

func esCommentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// esSentence turns the doc comment of name into a one-line meaning: its
// first clause, without the leading "Name is"/"Name are"/"Name".
func esSentence(doc, name string) string {
	s := doc
	for _, cut := range []string{". ", "; "} {
		if i := strings.Index(s, cut); i >= 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSuffix(s, ".")
	for _, p := range []string{name + " is ", name + " are ", name + " "} {
		if strings.HasPrefix(s, p) {
			s = s[len(p):]
			break
		}
	}
	return s
}

// esGen generates the schemas and the documentation model.
type esGen struct {
	group, proto *esGoDocs
	defs         *esObj                  // $defs of events/defs.schema.json
	defTypes     map[string]reflect.Type // def name → Go type
	errs         []string
}

func newESGen() (*esGen, error) {
	g := &esGen{defs: &esObj{}, defTypes: map[string]reflect.Type{}}
	var err error
	if g.group, err = esParseDocs("."); err != nil {
		return nil, err
	}
	if g.proto, err = esParseDocs("../protocol"); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *esGen) fail(format string, args ...any) {
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
}

// esRef returns a $ref, from a file in events/, to loc (relative to
// protocol/schemas).
func esRef(loc string) *esObj {
	if rest, ok := strings.CutPrefix(loc, "events/"); ok {
		return esO("$ref", rest)
	}
	return esO("$ref", "../"+loc)
}

func esCommon(def string) *esObj { return esRef("common.schema.json#/$defs/" + def) }

// esField is one JSON member of a struct.
type esField struct {
	owner        reflect.Type // the struct that declares it (an embedded one for flattened fields)
	goName, name string
	typ          reflect.Type
	omit         bool
}

func (f esField) key() string { return f.owner.Name() + "." + f.name }

// esFields lists t's members as encoding/json writes them, flattening
// untagged embedded structs.
func esFields(t reflect.Type) []esField {
	var out []esField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, esFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out = append(out, esField{owner: t, goName: f.Name, name: name, typ: f.Type, omit: omit})
	}
	return out
}

var esProtocolPkg = reflect.TypeFor[protocol.Event]().PkgPath()

// payload returns the schema of an event payload type: a closed object
// for a group struct, a $ref to the existing schema of a protocol type.
func (g *esGen) payload(t reflect.Type) *esObj {
	if loc, ok := esProtocolSchemas[t]; ok {
		return esRef(loc)
	}
	if t.Kind() != reflect.Struct || t.PkgPath() == esProtocolPkg {
		g.fail("payload type %v: want a group struct or a protocol type with a schema (esProtocolSchemas)", t)
		return esO()
	}
	return g.object(t)
}

// object is the closed-object schema of a struct.
func (g *esGen) object(t reflect.Type) *esObj {
	props := &esObj{}
	var required []string
	for _, f := range esFields(t) {
		if _, dup := props.get(f.name); dup {
			g.fail("%v: member %q appears twice", t, f.name)
		}
		props.set(f.name, g.member(f))
		if !f.omit {
			required = append(required, f.name)
		}
	}
	o := esO("type", "object", "additionalProperties", false)
	if len(required) > 0 {
		o.set("required", required)
	}
	o.set("properties", props)
	return o
}

// member is the schema of one struct member.
func (g *esGen) member(f esField) any {
	if v, ok := esMemberConst[f.key()]; ok {
		return esO("const", v)
	}
	if loc, ok := esMemberSchemas[f.key()]; ok {
		return esRef(loc)
	}
	t := f.typ
	if as, ok := esMemberAs[f.key()]; ok {
		if t.Kind() != reflect.String {
			g.fail("%s: esMemberAs applies to string members only", f.key())
		}
		t = as
	}
	return g.value(f, t)
}

func (g *esGen) value(f esField, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if loc, ok := esProtocolSchemas[t]; ok {
		return esRef(loc)
	}
	if t.Kind() == reflect.String && t.PkgPath() == esProtocolPkg && len(g.proto.consts[t.Name()]) > 0 {
		if loc, ok := esEnumSchemas[t]; ok {
			return esRef(loc)
		}
		return esO("enum", esEnumValues(t, g.proto.consts[t.Name()]))
	}
	switch t.Kind() {
	case reflect.String:
		switch {
		case strings.HasSuffix(f.name, "Id") || esIDMembers[f.name]:
			return esCommon("id")
		case strings.HasSuffix(f.name, "Hash") || strings.HasSuffix(f.name, "Digest") || esDigestMembers[f.name]:
			return esCommon("digest")
		}
		return esCommon("text")
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		switch {
		case strings.HasSuffix(f.name, "Epoch"):
			return esCommon("epoch")
		case esPositiveUints[f.name] || f.omit && f.typ.Kind() != reflect.Pointer:
			return esCommon("positiveUint")
		}
		return esCommon("uint")
	case reflect.Bool:
		return esO("type", "boolean")
	case reflect.Slice:
		item := f
		item.omit = false
		return esO("type", "array", "items", g.value(item, t.Elem()))
	case reflect.Struct:
		if t.PkgPath() == esProtocolPkg {
			return esRef("events/defs.schema.json#/$defs/" + g.def(t))
		}
		return g.object(t)
	}
	g.fail("%s: no schema rule for Go type %v", f.key(), t)
	return esO()
}

// def generates a protocol struct that has no schema of its own into
// defs.schema.json and returns its name there.
func (g *esGen) def(t reflect.Type) string {
	name := strings.ToLower(t.Name()[:1]) + t.Name()[1:]
	if _, ok := g.defTypes[name]; ok {
		return name
	}
	g.defTypes[name] = t
	g.defs.set(name, nil) // reserve: recursive types refer to it
	o := g.object(t)
	d := esO("description", esSentence(g.proto.types[t.Name()], t.Name()))
	for i, k := range o.keys {
		d.set(k, o.vals[i])
	}
	g.defs.set(name, d)
	return name
}

// esEnumValues filters consts by the type's Known method, when it has one.
func esEnumValues(t reflect.Type, consts []string) []string {
	var out []string
	for _, c := range consts {
		v := reflect.New(t).Elem()
		v.SetString(c)
		if m := v.MethodByName("Known"); m.IsValid() && !m.Call(nil)[0].Bool() {
			continue
		}
		out = append(out, c)
	}
	return out
}

// esTypeOrder lists the event types of Events in spec order: the core
// types of spec 15.2, then the ext.* types.
func esTypeOrder() []protocol.EventType {
	var out []protocol.EventType
	for _, t := range slices.Concat(protocol.CoreEventTypes, protocol.ExtEventTypes) {
		if _, ok := Events[t]; ok {
			out = append(out, t)
		}
	}
	var rest []protocol.EventType
	for t := range Events {
		if !slices.Contains(out, t) {
			rest = append(rest, t)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

const esGeneratedNote = "Generated from the Go payload types of group.Events: go test ./group -run TestEventSchemas -update"

// files generates every output: path (relative to this package) → bytes.
func (g *esGen) files() (map[string][]byte, error) {
	out := map[string][]byte{}
	payloads := map[protocol.EventType]*esObj{}
	for _, typ := range esTypeOrder() {
		r := Events[typ]
		body := g.payload(r.Payload)
		doc := esO(
			"$schema", "https://json-schema.org/draft/2020-12/schema",
			"$id", protocol.SchemaBaseURL+"events/"+string(typ)+".schema.json",
			"$comment", "Generated from "+esGoName(r.Payload)+", the payload type group.Events names for "+string(typ)+"; regenerate with go test ./group -run TestEventSchemas -update",
			"title", string(typ)+" payload",
		)
		if d := g.typeDoc(r.Payload); d != "" {
			doc.set("description", d)
		}
		for i, k := range body.keys {
			doc.set(k, body.vals[i])
		}
		payloads[typ] = doc
		out[filepath.Join(esSchemaDir, "events", string(typ)+".schema.json")] = esFile(doc)
	}
	defs := esO(
		"$schema", "https://json-schema.org/draft/2020-12/schema",
		"$id", protocol.SchemaBaseURL+"events/defs.schema.json",
		"$comment", "Generated from the payload types of group.Events; regenerate with go test ./group -run TestEventSchemas -update",
		"title", "Event payload definitions",
		"description", "protocol types nested in event payloads that have no schema of their own",
		"$defs", g.defs,
	)
	out[filepath.Join(esSchemaDir, "events", "defs.schema.json")] = esFile(defs)

	evPath := filepath.Join(esSchemaDir, "event.schema.json")
	cur, err := os.ReadFile(evPath)
	if err != nil {
		return nil, err
	}
	ev, err := esSpliceDispatch(cur, esDispatch())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", evPath, err)
	}
	out[evPath] = ev

	gen := map[string]*esObj{"events/defs.schema.json": defs}
	for typ, o := range payloads {
		gen["events/"+string(typ)+".schema.json"] = o
	}
	md, err := g.markdown(gen)
	if err != nil {
		return nil, err
	}
	out[esDocsFile] = md
	if len(g.errs) > 0 {
		return nil, fmt.Errorf("event schemas:\n  %s", strings.Join(g.errs, "\n  "))
	}
	return out, nil
}

func esGoName(t reflect.Type) string {
	if t.PkgPath() == esProtocolPkg {
		return "protocol." + t.Name()
	}
	return "group." + t.Name()
}

// typeDoc is the payload type's doc comment without its leading name.
func (g *esGen) typeDoc(t reflect.Type) string {
	docs := g.group
	if t.PkgPath() == esProtocolPkg {
		docs = g.proto
	}
	d := docs.types[t.Name()]
	for _, p := range []string{t.Name() + " is ", t.Name() + " "} {
		if strings.HasPrefix(d, p) {
			return d[len(p):]
		}
	}
	return d
}

const (
	esDispatchStart = "  \"$comment\": \"The allOf is generated"
	esDefsStart     = "\n  \"$defs\": {"
)

// esDispatch is the generated part of event.schema.json: per event type,
// its payload schema and, for Group events, its aggregate kind.
func esDispatch() string {
	var b strings.Builder
	b.WriteString(esDispatchStart + " from the Go payload types of group.Events (go test ./group -run TestEventSchemas -update): per event type, its payload schema and, for Group events, its aggregate kind. Unknown ext.* types carry a free-form object.\",\n")
	b.WriteString("  \"allOf\": [\n")
	types := esTypeOrder()
	for i, typ := range types {
		r := Events[typ]
		then := `{ "properties": { `
		if r.Aggregate != "" {
			then += `"aggregate": { "properties": { "kind": { "const": ` + esQuote(string(r.Aggregate)) + ` } } }, `
		}
		then += `"payload": { "$ref": ` + esQuote("events/"+string(typ)+".schema.json") + ` } } }`
		fmt.Fprintf(&b, "    {\n      \"if\": { \"properties\": { \"type\": { \"const\": %s } }, \"required\": [\"type\"] },\n      \"then\": %s\n    }", esQuote(string(typ)), then)
		if i < len(types)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  ],")
	return b.String()
}

// esSpliceDispatch replaces the generated part of event.schema.json (or
// inserts it before "$defs") and checks the result is still JSON.
func esSpliceDispatch(cur []byte, gen string) ([]byte, error) {
	s := string(cur)
	if i := strings.Index(s, esDispatchStart); i >= 0 {
		end := strings.Index(s[i:], "\n  ],")
		if end < 0 {
			return nil, fmt.Errorf("the generated allOf has no end")
		}
		s = s[:i] + gen + s[i+end+len("\n  ],"):]
	} else {
		i := strings.Index(s, esDefsStart)
		if i < 0 {
			return nil, fmt.Errorf("no \"$defs\" member to insert the generated allOf before")
		}
		s = s[:i+1] + gen + s[i:]
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("the spliced file is not JSON")
	}
	return []byte(s), nil
}

// esFile writes a schema file in the style of the command payload schemas:
// one top-level member per line, one property (or definition member) per
// line, everything below compact.
func esFile(o *esObj) []byte {
	var b bytes.Buffer
	esWriteExpanded(&b, o, "")
	b.WriteString("\n")
	return b.Bytes()
}

func esWriteExpanded(b *bytes.Buffer, o *esObj, indent string) {
	b.WriteString("{\n")
	for i, k := range o.keys {
		b.WriteString(indent + "  " + esQuote(k) + ": ")
		switch v := o.vals[i].(type) {
		case *esObj:
			switch k {
			case "$defs":
				b.WriteString("{\n")
				for j, dk := range v.keys {
					b.WriteString(indent + "    " + esQuote(dk) + ": ")
					esWriteExpanded(b, v.vals[j].(*esObj), indent+"    ")
					if j < len(v.keys)-1 {
						b.WriteString(",")
					}
					b.WriteString("\n")
				}
				b.WriteString(indent + "  }")
			case "properties":
				b.WriteString("{\n")
				for j, pk := range v.keys {
					b.WriteString(indent + "    " + esQuote(pk) + ": " + esCompact(v.vals[j]))
					if j < len(v.keys)-1 {
						b.WriteString(",")
					}
					b.WriteString("\n")
				}
				b.WriteString(indent + "  }")
			default:
				b.WriteString(esCompact(v))
			}
		default:
			b.WriteString(esCompact(v))
		}
		if i < len(o.keys)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + "}")
}

func esCompact(v any) string {
	switch v := v.(type) {
	case *esObj:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = esQuote(k) + ": " + esCompact(v.vals[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = esQuote(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []any:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = esCompact(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return esQuote(v)
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return string(v)
	case nil:
		return "null"
	}
	panic(fmt.Sprintf("esCompact: %T", v))
}

func esQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// esReadOrdered decodes JSON into esObj (objects in member order), []any,
// string, json.Number, bool and nil.
func esReadOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := esReadValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func esReadValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &esObj{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := esReadValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k.(string), v)
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := esReadValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

// esSchemaFiles reads the existing schema files (relative to
// protocol/schemas), to resolve $refs for documentation and checks.
type esSchemaFiles struct {
	gen   map[string]*esObj // generated files, by location
	files map[string]any
}

func (s *esSchemaFiles) file(name string) (any, error) {
	if o, ok := s.gen[name]; ok {
		return o, nil
	}
	if v, ok := s.files[name]; ok {
		return v, nil
	}
	data, err := os.ReadFile(filepath.Join(esSchemaDir, name))
	if err != nil {
		return nil, err
	}
	v, err := esReadOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.files[name] = v
	return v, nil
}

// resolve returns the schema at loc ("file#/pointer", relative to
// protocol/schemas) and the file it is in.
func (s *esSchemaFiles) resolve(loc string) (any, string, error) {
	file, ptr, _ := strings.Cut(loc, "#")
	v, err := s.file(file)
	if err != nil {
		return nil, "", err
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		o, ok := v.(*esObj)
		if !ok {
			return nil, "", fmt.Errorf("%s: %s is not an object", loc, tok)
		}
		if v, ok = o.get(tok); !ok {
			return nil, "", fmt.Errorf("%s does not exist", loc)
		}
	}
	return v, file, nil
}

// refLoc resolves a $ref found in file to a location relative to
// protocol/schemas.
func esRefLoc(file, ref string) string {
	target, ptr, hasPtr := strings.Cut(ref, "#")
	if target == "" {
		target = file
	} else {
		target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), target)))
	}
	if hasPtr {
		return target + "#" + ptr
	}
	return target
}

// esTypeNames names the schemas the documentation shows as Go types.
func esTypeNames() map[string]string {
	names := map[string]string{}
	for t, loc := range esProtocolSchemas {
		if t.Kind() == reflect.Struct && t != reflect.TypeFor[protocol.Time]() {
			names[loc] = t.Name()
		}
	}
	return names
}

// esDocRow is one member line of docs/events.md.
type esDocRow struct {
	path, typ, meaning string
	required           bool
}

// rows documents the members of an object schema o (found in file)
// described by the Go struct t; nested inline objects add rows under
// their member's path.
func (g *esGen) rows(s *esSchemaFiles, o *esObj, file string, t reflect.Type, prefix string) []esDocRow {
	props, _ := o.get("properties")
	po, _ := props.(*esObj)
	if po == nil {
		g.fail("%s: %s has no properties to document", file, prefix)
		return nil
	}
	reqv, _ := o.get("required")
	var required []string
	switch r := reqv.(type) {
	case []string:
		required = r
	case []any:
		for _, x := range r {
			required = append(required, x.(string))
		}
	}
	fields := map[string]esField{}
	for _, f := range esFields(t) {
		fields[f.name] = f
	}
	var out []esDocRow
	for i, name := range po.keys {
		f, ok := fields[name]
		if !ok {
			g.fail("%v has no member %q that %s describes", t, name, file)
			continue
		}
		ps, _ := po.vals[i].(*esObj)
		row := esDocRow{path: prefix + name, typ: g.render(s, file, po.vals[i]), meaning: g.meaning(f), required: slices.Contains(required, name)}
		out = append(out, row)
		if ps != nil && ps.str("type") == "object" {
			if _, inline := ps.get("properties"); inline {
				ft := f.typ
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				out = append(out, g.rows(s, ps, file, ft, prefix+name+".")...)
			}
		}
	}
	return out
}

// meaning is the one-line meaning of a member: its doc comment, the
// glossary, or its named type's doc comment.
func (g *esGen) meaning(f esField) string {
	docs := g.group
	if f.owner.PkgPath() == esProtocolPkg {
		docs = g.proto
	}
	if d := docs.fields[f.owner.Name()+"."+f.goName]; d != "" {
		return esSentence(d, f.goName)
	}
	if m, ok := esGlossary[f.key()]; ok {
		return m
	}
	if m, ok := esGlossary[f.name]; ok {
		return m
	}
	t := f.typ
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		tdocs := g.group
		if t.PkgPath() == esProtocolPkg {
			tdocs = g.proto
		}
		if d := tdocs.types[t.Name()]; d != "" && t.Name() != "Time" {
			return esSentence(d, t.Name())
		}
	}
	if t.Kind() == reflect.String && t.PkgPath() == esProtocolPkg {
		if d := g.proto.types[t.Name()]; d != "" {
			return esSentence(d, t.Name())
		}
	}
	g.fail("%s (%s.%s): no meaning: give the field a Go doc comment", f.key(), esGoName(f.owner), f.goName)
	return ""
}

// render is the documentation's short text for a member's schema.
func (g *esGen) render(s *esSchemaFiles, file string, v any) string {
	o, ok := v.(*esObj)
	if !ok {
		if v == true {
			return "any"
		}
		return "?"
	}
	if ref := o.str("$ref"); ref != "" {
		loc := esRefLoc(file, ref)
		target, tfile, err := s.resolve(loc)
		if err != nil {
			g.fail("%s: %v", file, err)
			return "?"
		}
		if to, ok := target.(*esObj); ok {
			if _, isEnum := to.get("enum"); isEnum {
				return g.render(s, tfile, to)
			}
		}
		if name, ok := esTypeNames()[loc]; ok {
			return "*" + name + "* (`" + loc + "`)"
		}
		if def, ok := strings.CutPrefix(loc, "events/defs.schema.json#/$defs/"); ok {
			return "*" + g.defTypes[def].Name() + "* (`" + loc + "`)"
		}
		if def, ok := strings.CutPrefix(loc, "common.schema.json#/$defs/"); ok {
			if to, ok := target.(*esObj); !ok || to.str("type") != "object" {
				return def
			}
		}
		return "*" + loc[strings.LastIndex(loc, "/")+1:] + "* (`" + loc + "`)"
	}
	if c, ok := o.get("const"); ok {
		return "`" + esCompact(c) + "`"
	}
	if e, ok := o.get("enum"); ok {
		var vals []string
		switch e := e.(type) {
		case []string:
			for _, x := range e {
				vals = append(vals, "`"+esQuote(x)+"`")
			}
		case []any:
			for _, x := range e {
				vals = append(vals, "`"+esCompact(x)+"`")
			}
		}
		return strings.Join(vals, " \\| ")
	}
	switch o.str("type") {
	case "array":
		items, _ := o.get("items")
		it := g.render(s, file, items)
		if strings.Contains(it, " \\| ") {
			it = "(" + it + ")"
		}
		return it + "[]"
	case "object":
		return "object"
	case "boolean":
		return "bool"
	case "":
		return "?"
	}
	return o.str("type")
}

// markdown generates docs/events.md.
func (g *esGen) markdown(gen map[string]*esObj) ([]byte, error) {
	s := &esSchemaFiles{gen: gen, files: map[string]any{}}
	var b bytes.Buffer
	b.WriteString(`# Event payloads

<!-- ` + esGeneratedNote + ` -->

The payload of every Event type this implementation emits and reads: one Go type per payload in
package group (` + "`group.Events`" + `), from which the JSON Schemas in ` + "`protocol/schemas/events/`" + ` and
this page are generated, so neither can drift from the Go types (TestEventSchemas fails when they
differ). ` + "`event.schema.json`" + ` checks each Event's payload against its type's schema and its
` + "`aggregate.kind`" + ` against its type; Organization-scoped Events carry no aggregate. The payload of
an unknown ` + "`ext.<organization>.<profile>.<name>`" + ` type is a free-form object; an unknown type outside
` + "`ext.*`" + ` is refused (SCHEMA_VALIDATION_FAILED at ` + "`/type`" + `). Every payload is a closed object.

Scalar types are the definitions of ` + "`common.schema.json`" + `: ` + "`id`" + `, ` + "`time`" + ` (RFC 3339 UTC, at
most milliseconds), ` + "`digest`" + ` (` + "`sha256:`" + ` + 64 hex), ` + "`uint`" + `, ` + "`epoch`" + ` and ` + "`revision`" + ` (0 … 2^53−1),
` + "`positiveUint`" + ` (1 … 2^53−1), ` + "`text`" + ` (non-empty string). *Italic* names are the objects of the
schemas named beside them; ` + "`T[]`" + ` is an array of T. Members without a Go doc comment take their
meaning from the generator's glossary (group/eventschema_gen_test.go).

| event type | aggregate kind | payload (Go type) |
| --- | --- | --- |
`)
	for _, typ := range esTypeOrder() {
		r := Events[typ]
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | `%s` |\n", typ, esAnchor(string(typ)), esKind(r.Aggregate), esGoName(r.Payload))
	}
	for _, typ := range esTypeOrder() {
		r := Events[typ]
		file := "events/" + string(typ) + ".schema.json"
		o := gen[file]
		fmt.Fprintf(&b, "\n## %s\n\n", typ)
		fmt.Fprintf(&b, "Aggregate kind: %s. Payload: `%s` (`%s`)", esKind(r.Aggregate), esGoName(r.Payload), file)
		body := o
		if ref := o.str("$ref"); ref != "" {
			loc := esRefLoc(file, ref)
			fmt.Fprintf(&b, ", the object of `%s`", loc)
			target, tfile, err := s.resolve(loc)
			if err != nil {
				return nil, err
			}
			body, file = target.(*esObj), tfile
		}
		b.WriteString(".\n")
		if d := g.goDoc(r.Payload); d != "" {
			b.WriteString("\n" + d + "\n")
		}
		b.WriteString("\n| member | type | required | meaning |\n| --- | --- | --- | --- |\n")
		for _, row := range g.rows(s, body, file, r.Payload, "") {
			req := "no"
			if row.required {
				req = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", row.path, row.typ, req, esCell(row.meaning))
		}
	}
	if len(g.defs.keys) > 0 {
		b.WriteString("\n## Definitions (`events/defs.schema.json`)\n")
		names := slices.Clone(g.defs.keys)
		sort.Strings(names)
		for _, name := range names {
			d, _ := g.defs.get(name)
			t := g.defTypes[name]
			fmt.Fprintf(&b, "\n### %s\n\n`protocol.%s`: %s.\n\n| member | type | required | meaning |\n| --- | --- | --- | --- |\n",
				t.Name(), t.Name(), d.(*esObj).str("description"))
			for _, row := range g.rows(s, d.(*esObj), "events/defs.schema.json", t, "") {
				req := "no"
				if row.required {
					req = "yes"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", row.path, row.typ, req, esCell(row.meaning))
			}
		}
	}
	return b.Bytes(), nil
}

func esKind(k protocol.AggregateKind) string {
	if k == "" {
		return "none (Organization-scoped)"
	}
	return "`" + string(k) + "`"
}

// esAnchor is the heading anchor GitHub derives from an event type.
func esAnchor(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), ".", "")
}

// goDoc is the Go doc comment of a payload type.
func (g *esGen) goDoc(t reflect.Type) string {
	if t.PkgPath() == esProtocolPkg {
		return g.proto.types[t.Name()]
	}
	return g.group.types[t.Name()]
}

func esCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
