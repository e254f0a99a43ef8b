package protocol

import "fmt"

// KnownExtension reports the extension URIs this implementation interprets.
func KnownExtension(uri string) bool {
	return uri == OfflineExtensionURI || uri == EnrollmentExtensionURI
}

// Relayed is what of an accepted command's extensions its events carry:
// every entry the receiver does not interpret itself (interpreted),
// unchanged; nil when there are none. Interpreted ones have their effect
// in the payload. An accepted command's other critical entries are those
// of profiles its Group pins (an unknown critical one refuses it).
func Relayed(exts Extensions, interpreted func(uri string) bool) Extensions {
	var out Extensions
	for uri, e := range exts {
		if interpreted(uri) {
			continue
		}
		if out == nil {
			out = Extensions{}
		}
		out[uri] = e
	}
	return out
}

// CheckExtensions applies spec 17.4/18 to the top-level `extensions` member of
// a parsed document: an unknown extension marked critical is
// UNKNOWN_CRITICAL_EXTENSION; unknown non-critical ones are left untouched so
// they can be relayed byte-equivalent in canonical form.
func CheckExtensions(doc any, known func(uri string) bool) error {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	exts, ok := m["extensions"].(map[string]any)
	if !ok {
		return nil
	}
	for uri, e := range exts {
		em, _ := e.(map[string]any)
		if crit, _ := em["critical"].(bool); crit && !known(uri) {
			return Errorf(CodeUnknownCriticalExtension, "critical extension %q is not supported", uri).
				At(pointerOf([]string{"extensions", uri}))
		}
	}
	return nil
}

// CheckCommandEpochs applies the presence and absence rules of spec 15.1 to a
// parsed Command envelope (which should already satisfy command.schema.json).
// A breach is INVALID_COMMAND with the pointer of the offending member.
func CheckCommandEpochs(doc any) error {
	m, ok := doc.(map[string]any)
	if !ok {
		return Errorf(CodeInvalidCommand, "command is not an object")
	}
	typ, _ := m["type"].(string)
	actor, _ := m["actor"].(map[string]any)
	kind, _ := actor["kind"].(string)
	has := func(name string) bool { _, ok := m[name]; return ok }
	bad := func(name, format string, args ...any) error {
		return Errorf(CodeInvalidCommand, "%s: %s", typ, fmt.Sprintf(format, args...)).At("/" + name)
	}
	rule := Commands[CommandType(typ)]
	leaseOnly := rule.CoordinatorEpoch == EpochRequired

	switch rule.Scope {
	case ScopeOrganization:
		// Organization bootstrap: no Group and none of the three epochs.
		for _, f := range []string{"groupId", "sessionEpoch", "membershipEpoch", "coordinatorEpoch"} {
			if has(f) {
				return bad(f, "Organization bootstrap commands must not carry %s", f)
			}
		}
		return nil
	case ScopeNewGroup:
		// They name the Group being created; no membership or session exists yet.
		if !has("groupId") {
			return bad("groupId", "must name the Group it creates")
		}
		for _, f := range []string{"sessionEpoch", "membershipEpoch", "coordinatorEpoch"} {
			if has(f) {
				return bad(f, "must not carry %s: the Group does not exist yet", f)
			}
		}
		if rule.Sender == SenderAnyHuman && kind != "human" {
			return Errorf(CodeInvalidCommand, "%s: only a human may create a Mission", typ).At("/actor/kind")
		}
		return nil
	}

	if !has("groupId") {
		return bad("groupId", "Group-scoped command without groupId")
	}
	switch kind {
	case "agent":
		if !has("sessionEpoch") {
			return bad("sessionEpoch", "an agent command must carry its current sessionEpoch")
		}
		if !has("membershipEpoch") {
			return bad("membershipEpoch", "an agent command must carry its current membershipEpoch")
		}
		if (leaseOnly || rule.CoordinatorEpoch == EpochForAgents) && !has("coordinatorEpoch") {
			return bad("coordinatorEpoch", "authority comes from the coordinator lease: coordinatorEpoch is required")
		}
	case "human":
		if has("sessionEpoch") {
			return bad("sessionEpoch", "a human command must not carry an agent sessionEpoch")
		}
		if !has("membershipEpoch") {
			return bad("membershipEpoch", "a human command inside a Group must carry its membershipEpoch")
		}
		if has("coordinatorEpoch") {
			return bad("coordinatorEpoch", "coordinator leases are held by agents")
		}
		if leaseOnly {
			return Errorf(CodeInvalidCommand, "%s: needs the coordinator lease, held by an agent", typ).At("/actor/kind")
		}
	case "service":
		for _, f := range []string{"sessionEpoch", "membershipEpoch", "coordinatorEpoch"} {
			if has(f) {
				return bad(f, "an Organization service must not invent %s", f)
			}
		}
		if leaseOnly {
			return Errorf(CodeInvalidCommand, "%s: needs the coordinator lease, held by an agent", typ).At("/actor/kind")
		}
	default:
		return Errorf(CodeInvalidCommand, "unknown actor kind %q", kind).At("/actor/kind")
	}
	return nil
}
