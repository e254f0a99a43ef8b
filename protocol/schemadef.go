package protocol

import (
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var defSchemas sync.Map // definition name -> *jsonschema.Schema

// ValidateDef checks v (a decoded JSON value, as Parse returns) against one
// definition of common.schema.json, e.g. "selectionBasis", "progress" or
// "usage": the shapes docs/wire.md names that appear inside other documents.
func ValidateDef(def string, v any) error {
	set, err := loadSchemas()
	if err != nil {
		return Errorf(CodeInternalError, "schemas: %v", err)
	}
	name := "common.schema.json#/$defs/" + def
	if strings.ContainsAny(def, "/#~") || def == "" {
		return Errorf(CodeSchemaValidationFailed, "bad definition name %q", def)
	}
	s, ok := defSchemas.Load(def)
	if !ok {
		c, err := newSchemaCompiler(set.patterns, set.described)
		if err != nil {
			return Errorf(CodeInternalError, "schemas: %v", err)
		}
		compiled, err := c.Compile(SchemaBaseURL + name)
		if err != nil {
			return Errorf(CodeSchemaValidationFailed, "unknown definition %q: %v", def, err)
		}
		s, _ = defSchemas.LoadOrStore(def, compiled)
	}
	return set.check(name, s.(*jsonschema.Schema), v)
}
