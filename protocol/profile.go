package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Extension profiles (spec 18): an Organization-approved profile names a
// URI, a semantic version and the schema of its data by URI and hash. A
// Group pins the major versions it uses; data under a pinned profile is
// validated against the profile's schema.

// ProfileSchema validates the data of one extension profile.
type ProfileSchema struct {
	uri string
	s   *jsonschema.Schema
	set *schemaSet
}

// CheckProfile checks a profile document against its schema bytes: the
// profile conforms to extension-profile.schema.json, its schemaHash is the
// digest of the schema's canonical (JCS) bytes, and the schema compiles
// (JSON Schema 2020-12; it may $ref the protocol's own schemas by their
// $id). The profile's signature is the caller's to verify: it needs the
// Organization's keys.
func CheckProfile(doc map[string]any, schema []byte) (ExtensionProfile, *ProfileSchema, error) {
	var p ExtensionProfile
	if err := Validate("extension-profile", doc); err != nil {
		return p, nil, err
	}
	raw, err := Canonical(doc)
	if err != nil {
		return p, nil, err
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, nil, Errorf(CodeSchemaValidationFailed, "profile: %v", err)
	}
	if _, err := p.Major(); err != nil {
		return p, nil, err
	}
	got, err := SchemaHash(schema)
	if err != nil {
		return p, nil, fmt.Errorf("profile %s: schema: %w", p.URI, err)
	}
	if got != p.SchemaHash {
		return p, nil, Errorf(CodeInvalidCommand, "profile %s: schemaHash %s, the schema's canonical bytes hash to %s", p.URI, p.SchemaHash, got).At("/schemaHash")
	}
	ps, err := compileProfileSchema(p.SchemaURI, schema)
	if err != nil {
		return p, nil, fmt.Errorf("profile %s: schema %s: %w", p.URI, p.SchemaURI, err)
	}
	return p, ps, nil
}

// Major is the major number of the profile's semantic version.
func (p ExtensionProfile) Major() (uint64, error) {
	head, _, _ := strings.Cut(p.Version, ".")
	n, err := strconv.ParseUint(head, 10, 64)
	if err != nil {
		return 0, Errorf(CodeInvalidCommand, "profile %s: version %q is not semantic", p.URI, p.Version).At("/version")
	}
	return n, nil
}

func compileProfileSchema(uri string, schema []byte) (*ProfileSchema, error) {
	set, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	c, err := newSchemaCompiler(map[string]string{}, map[string]string{})
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(uri, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(uri)
	if err != nil {
		return nil, err
	}
	return &ProfileSchema{uri: uri, s: s, set: set}, nil
}

// Validate checks extension data (parsed, as Parse returns it) against the
// profile's schema; problems are reported under the pointer base, e.g.
// /extensions/<uri>/data.
func (ps *ProfileSchema) Validate(v any, base string) error {
	var problems []Problem
	if err := ps.set.run(ps.s, v, base, &problems); err != nil {
		return Errorf(CodeInternalError, "validate %s: %v", ps.uri, err)
	}
	return result(ps.uri, problems)
}

// SignedProfile signs an extension profile at its approvedAt and returns
// its JCS bytes (the Organization's approval, spec 18).
func SignedProfile(p ExtensionProfile, k PrivateKey) ([]byte, error) {
	p.Signature = Signature{}
	doc, err := toDoc(p)
	if err != nil {
		return nil, err
	}
	delete(doc, "signature")
	if err := Sign(doc, k, p.ApprovedAt.Time); err != nil {
		return nil, err
	}
	return Canonical(doc)
}

// SchemaHash is the schemaHash of a profile's schema: the digest of its
// canonical (JCS) bytes.
func SchemaHash(schema []byte) (string, error) {
	parsed, err := Parse(schema, DecodeOptions{})
	if err != nil {
		return "", err
	}
	canon, err := Canonical(parsed)
	if err != nil {
		return "", err
	}
	return Digest(canon), nil
}
