package protocol

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Inbound checks documents that arrive from outside. Each one is parsed
// once; signature, epoch rules, schema, extensions and the typed decode all
// reuse that parsed value (docs/performance.md: verification is the floor, everything
// else must stay small beside it).
type Inbound struct {
	Decode  DecodeOptions
	Keys    KeyResolver
	MaxSkew time.Duration         // 0 means DefaultMaxSkew
	Known   func(uri string) bool // extensions interpreted here; nil means KnownExtension
}

// InboundCommand is a Command that passed every check of DecodeCommand.
type InboundCommand struct {
	Command *Command
	Value   map[string]any // the parsed document, as received
	Raw     []byte         // the bytes as received

	input []byte // the signing input DecodeCommand verified
	lay   signedLayout
	value string // signature.value
	canon []byte // Raw, when it is already the canonical bytes
}

// CanonicalBytes returns the command's JCS bytes, signature included: what
// the authority compares when the same (actor, actionId) comes again. They
// are those of Value as received: the verified signing input with the
// signature's value put back.
//
// A command that arrived canonical (the authority's connections hand it
// over so) is its own canonical form: then they are Raw, not a copy.
func (c *InboundCommand) CanonicalBytes() ([]byte, error) {
	if c.canon != nil {
		return c.canon, nil
	}
	if c.input == nil {
		return Canonical(c.Value)
	}
	return appendSignedValue(make([]byte, 0, len(c.input)+valueMember), c.input, &c.lay, c.value), nil
}

// DecodeCommand runs the checks a Command gets before any state is looked
// at, in the order of spec 15.1: strict decoding (PROTOCOL_VIOLATION),
// protocol version (UNSUPPORTED_VERSION), authentication — signature, the
// key belonging to the actor, freshness (AUTH_INVALID_SIGNATURE) — the epoch
// presence rules (INVALID_COMMAND), the schema (SCHEMA_VALIDATION_FAILED or
// WORK_CONTRACT_INCOMPLETE), critical extensions
// (UNKNOWN_CRITICAL_EXTENSION), then the typed decode.
func (in *Inbound) DecodeCommand(data []byte, now time.Time) (*InboundCommand, error) {
	text := &signedText{data: data}
	v, err := parse(data, in.Decode, &text.raw)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, Errorf(CodeProtocolViolation, "a Command must be a JSON object")
	}
	if pv, ok := doc["protocolVersion"].(string); ok && pv != Version {
		return nil, Errorf(CodeUnsupportedVersion, "protocolVersion %q is not supported (this peer speaks %q)", pv, Version).At("/protocolVersion")
	}
	skew := in.MaxSkew
	if skew == 0 {
		skew = DefaultMaxSkew
	}
	// Canonical JSON may be longer than the text only by number forms.
	ic := &InboundCommand{Value: doc, Raw: data}
	ic.input, ic.value, err = verifyFreshCommand(doc, in.Keys, now, skew, make([]byte, 0, len(data)+64), &ic.lay, text)
	if err != nil {
		return nil, err
	}
	if text.raw.canonical {
		ic.canon = data
	}
	if err := CheckCommandSigner(doc); err != nil {
		return nil, err
	}
	if err := CheckCommandEpochs(doc); err != nil {
		return nil, err
	}
	if err := Validate("command", doc); err != nil {
		return nil, err
	}
	known := in.Known
	if known == nil {
		known = KnownExtension
	}
	if err := CheckExtensions(doc, known); err != nil {
		return nil, err
	}
	if ic.Command, err = commandFromParsed(doc, ic.input, &ic.lay); err != nil {
		return nil, err
	}
	return ic, nil
}

// commandFromParsed builds the typed Command from a parsed envelope that
// already passed command.schema.json, without decoding the bytes a second
// time. Payload and extension data become their canonical bytes, which
// relay the same value with the same signature input: the slices of input
// (the verified signing input, laid out as lay says) that hold them.
func commandFromParsed(doc map[string]any, input []byte, lay *signedLayout) (*Command, error) {
	// The Command and its optional numbers in one allocation.
	a := &struct {
		c    Command
		nums [4]uint64
	}{}
	c := &a.c
	*c = Command{
		ActionID:                   str(doc, "actionId"),
		ProtocolVersion:            str(doc, "protocolVersion"),
		Type:                       CommandType(str(doc, "type")),
		GroupID:                    str(doc, "groupId"),
		CooperationOverrideGrantID: str(doc, "cooperationOverrideGrantId"),
		CorrelationID:              str(doc, "correlationId"),
	}
	actor, _ := doc["actor"].(map[string]any)
	c.Actor = Actor{Kind: ActorKind(str(actor, "kind")), ID: str(actor, "id")}
	var err error
	for i, m := range [...]struct {
		name string
		dst  **uint64
	}{
		{"coordinatorEpoch", &c.CoordinatorEpoch}, {"expectedRevision", &c.ExpectedRevision},
		{"membershipEpoch", &c.MembershipEpoch}, {"sessionEpoch", &c.SessionEpoch},
	} {
		if *m.dst, err = optUint(doc, m.name, &a.nums[i]); err != nil {
			return nil, err
		}
	}
	if c.IssuedAt, err = ParseTime(str(doc, "issuedAt")); err != nil {
		return nil, Errorf(CodeSchemaValidationFailed, "issuedAt: %v", err).At("/issuedAt")
	}
	if p := lay.payload; p.end > 0 {
		c.Payload = input[p.start:p.end:p.end]
	} else if c.Payload, err = Canonical(doc["payload"]); err != nil {
		return nil, err
	}
	if exts, ok := doc["extensions"].(map[string]any); ok {
		c.Extensions = make(Extensions, len(exts))
		for uri, e := range exts {
			em, _ := e.(map[string]any)
			crit, _ := em["critical"].(bool)
			var data []byte
			if d, ok := em["data"]; ok {
				if sp, ok := lay.extData(uri); ok {
					data = input[sp.start:sp.end:sp.end]
				} else if data, err = Canonical(d); err != nil {
					return nil, err
				}
			}
			c.Extensions[uri] = Extension{Critical: crit, Data: data}
		}
	}
	sig, _ := doc["signature"].(map[string]any)
	c.Signature = Signature{Alg: str(sig, "alg"), KeyID: str(sig, "keyId"), Value: str(sig, "value")}
	if c.Signature.CreatedAt, err = ParseTime(str(sig, "createdAt")); err != nil {
		return nil, Errorf(CodeSchemaValidationFailed, "signature.createdAt: %v", err).At("/signature/createdAt")
	}
	return c, nil
}

func str(m map[string]any, name string) string {
	s, _ := m[name].(string)
	return s
}

// optUint reads an optional unsigned integer member into *u; absent is nil.
func optUint(m map[string]any, name string, u *uint64) (*uint64, error) {
	v, ok := m[name]
	if !ok {
		return nil, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, Errorf(CodeSchemaValidationFailed, "%s must be an integer", name).At("/" + name)
	}
	x, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || x > maxSafeInteger {
		// Schema-valid integers may be written 1e2 or 3.0.
		f, ferr := n.Float64()
		if ferr != nil || f < 0 || f > maxSafeInteger || f != math.Trunc(f) {
			return nil, Errorf(CodeSchemaValidationFailed, "%s must be an integer 0 … 2^53−1", name).At("/" + name)
		}
		x = uint64(f)
	}
	*u = x
	return u, nil
}
