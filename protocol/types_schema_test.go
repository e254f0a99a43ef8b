package protocol

import (
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTypesFollowSchemaMembers compares each Go struct with its schema
// object, member by member and recursively: the JSON names are exactly the
// schema's properties, and the members Go always emits (no omitempty or
// omitzero) are exactly the schema's required ones. It catches a tag typo,
// a missing member, and a required member that Go would drop when zero.
func TestTypesFollowSchemaMembers(t *testing.T) {
	s := typesSchemaSet{t: t, files: map[string]map[string]any{}}
	targets := []struct {
		ref string
		typ any
	}{
		{"command.schema.json", Command{}},
		{"event.schema.json", Event{}},
		{"error.schema.json", Error{}},
		{"work-contract.schema.json", WorkContract{}},
		{"work-item.schema.json", WorkItem{}},
		{"lease.schema.json#/$defs/ownershipGrant", OwnershipGrant{}},
		{"lease.schema.json#/$defs/executionLease", ExecutionLease{}},
		{"agent-card.schema.json", AgentCard{}},
		{"presence-record.schema.json", PresenceRecord{}},
		{"mission.schema.json", Mission{}},
		{"group.schema.json", Group{}},
		{"membership.schema.json", Membership{}},
		{"conversation.schema.json", Conversation{}},
		{"message.schema.json", Message{}},
		{"artifact.schema.json", ArtifactManifest{}},
		{"evidence.schema.json", Evidence{}},
		{"approval.schema.json", Approval{}},
		{"context-package.schema.json", ContextPackage{}},
		{"group-snapshot.schema.json", GroupSnapshot{}},
		{"extension-profile.schema.json", ExtensionProfile{}},
		{"first-admission-record.schema.json", FirstAdmissionRecord{}},
		{"websocket-frame.schema.json#/$defs/subscribe", Subscribe{}},
		{"websocket-frame.schema.json#/$defs/command", CommandFrame{}},
		{"websocket-frame.schema.json#/$defs/event", EventFrame{}},
		{"websocket-frame.schema.json#/$defs/ping", Ping{}},
		{"websocket-frame.schema.json#/$defs/error", ErrorFrame{}},
		{"websocket-frame.schema.json#/$defs/backpressure", Backpressure{}},
		{"common.schema.json#/$defs/usage", Usage{}},
		{"common.schema.json#/$defs/budgets", Budgets{}},
		{"common.schema.json#/$defs/progress", Progress{}},
		{"common.schema.json#/$defs/scheduleDisclosure", ScheduleDisclosure{}},
		{"common.schema.json#/$defs/selectionBasis", SelectionBasis{}},
		{"common.schema.json#/$defs/admissionRejection", AdmissionRejection{}},
		{"common.schema.json#/$defs/offlineBinding", OfflineBinding{}},
		{"common.schema.json#/$defs/snapshotRef", SnapshotRef{}},
		{"common.schema.json#/$defs/extensionEntry", Extension{}},
	}
	for _, ct := range slices.Concat(CoreCommandTypes, ExtCommandTypes) {
		targets = append(targets, struct {
			ref string
			typ any
		}{"payloads/" + string(ct) + ".schema.json", reflect.ValueOf(PayloadFor(ct)).Elem().Interface()})
	}
	for _, tg := range targets {
		t.Run(tg.ref, func(t *testing.T) {
			s.t = t
			file, node := s.resolve("", map[string]any{"$ref": tg.ref})
			s.compare(file, node, reflect.TypeOf(tg.typ), tg.ref)
		})
	}
}

// typesAlwaysOmittable lists the members a Go value may omit although the
// schema requires them, each for a documented reason.
var typesAlwaysOmittable = map[string]bool{
	// Signature.Value is omitted when empty so an unsigned object marshals
	// to the signing input.
	"Signature.value": true,
}

type typesSchemaSet struct {
	t     *testing.T
	files map[string]map[string]any
}

func (s *typesSchemaSet) file(name string) map[string]any {
	if doc, ok := s.files[name]; ok {
		return doc
	}
	raw, err := fs.ReadFile(SchemaFS(), name)
	if err != nil {
		s.t.Fatalf("schema %s: %v", name, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		s.t.Fatalf("schema %s: %v", name, err)
	}
	s.files[name] = doc
	return doc
}

// resolve follows $ref chains; it returns the file the node lives in, so
// that "#/..." references inside it resolve against the right document.
func (s *typesSchemaSet) resolve(file string, node any) (string, map[string]any) {
	for range 16 {
		m, ok := node.(map[string]any)
		if !ok {
			return file, nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return file, m
		}
		target, pointer, _ := strings.Cut(ref, "#")
		if target != "" {
			file = path.Join(path.Dir(file), target) // relative to the referring file
		}
		var cur any = s.file(file)
		for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
			if tok == "" {
				continue
			}
			cur = cur.(map[string]any)[tok]
		}
		node = cur
	}
	s.t.Fatalf("$ref chain too long in %s", file)
	return "", nil
}

// members gathers properties and required names of an object schema,
// including those of allOf parts.
func (s *typesSchemaSet) members(file string, node map[string]any) (map[string]any, map[string]string, []string) {
	props := map[string]any{}
	propFile := map[string]string{}
	var required []string
	var add func(file string, n map[string]any)
	add = func(file string, n map[string]any) {
		if p, ok := n["properties"].(map[string]any); ok {
			for k, v := range p {
				if _, seen := props[k]; !seen || v != true {
					props[k], propFile[k] = v, file
				}
			}
		}
		if r, ok := n["required"].([]any); ok {
			for _, x := range r {
				required = append(required, x.(string))
			}
		}
		if all, ok := n["allOf"].([]any); ok {
			for _, part := range all {
				f, m := s.resolve(file, part)
				if m != nil {
					add(f, m)
				}
			}
		}
	}
	add(file, node)
	return props, propFile, required
}

func (s *typesSchemaSet) compare(file string, node map[string]any, typ reflect.Type, where string) {
	t := s.t
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if node == nil || typ.Kind() != reflect.Struct || typ == reflect.TypeFor[Time]() {
		return
	}
	props, propFile, required := s.members(file, node)
	if len(props) == 0 {
		return // free-form or a scalar form; nothing to compare
	}
	var names, emitted []string
	fieldType := map[string]reflect.Type{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		names = append(names, name)
		fieldType[name] = f.Type
		omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !omit || typesAlwaysOmittable[typ.Name()+"."+name] {
			emitted = append(emitted, name)
		}
	}
	var schemaNames []string
	for k := range props {
		schemaNames = append(schemaNames, k)
	}
	slices.Sort(names)
	slices.Sort(schemaNames)
	if !slices.Equal(names, schemaNames) {
		t.Errorf("%s (%v): Go members %v, schema properties %v", where, typ, names, schemaNames)
	}
	slices.Sort(emitted)
	required = slices.Compact(slices.Sorted(slices.Values(required)))
	if !slices.Equal(emitted, required) {
		t.Errorf("%s (%v): Go always emits %v, schema requires %v", where, typ, emitted, required)
	}
	for name, prop := range props {
		ft, ok := fieldType[name]
		if !ok {
			continue
		}
		pf, pn := s.resolve(propFile[name], prop)
		// Arrays and lists compare their items; maps are free-form keyed.
		for ft.Kind() == reflect.Pointer || (ft.Kind() == reflect.Slice && ft != rawMessageType) {
			if ft.Kind() == reflect.Slice {
				if pn == nil {
					break
				}
				pf, pn = s.resolve(pf, pn["items"])
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			s.compare(pf, pn, ft, where+"/"+name)
		}
	}
}
