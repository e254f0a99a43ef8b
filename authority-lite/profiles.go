package authoritylite

import (
	"strconv"
	"strings"
	"sync"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Extension profiles (spec 18). The Organization registers approved
// profiles with the authority at start (authority serve --profile), as it
// does its principals; a Group pins the major versions it uses at
// mission.create. A command's extension under a profile the Group pins is
// validated against the profile's schema; a critical extension the Group
// does not pin is unknown to it (UNKNOWN_CRITICAL_EXTENSION).

// profileRecord is one registered profile.
type profileRecord struct {
	profile protocol.ExtensionProfile
	major   uint64
	schema  *protocol.ProfileSchema
}

// profileRegistry holds the registered profiles by URI.
type profileRegistry struct {
	mu sync.RWMutex
	m  map[string]*profileRecord
}

func (r *profileRegistry) get(uri string) *profileRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[uri]
}

// known is the inbound decoder's test for a critical extension: one the
// authority interprets, or a registered profile (whose Group pins are
// checked with the Group, checkExtensions).
func (r *profileRegistry) known(uri string) bool {
	return protocol.KnownExtension(uri) || r.get(uri) != nil
}

// RegisterProfile registers an Organization-approved extension profile: doc
// is the signed profile document, schema the JSON Schema its schemaUri and
// schemaHash name. The profile must be signed by a registered
// Organization policy service (AddPrincipal); registering a URI again
// replaces it.
func (s *Service) RegisterProfile(doc, schema []byte) error {
	parsed, err := protocol.Parse(doc, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	m, ok := parsed.(map[string]any)
	if !ok {
		return protocol.Errorf(protocol.CodeSchemaValidationFailed, "a profile is a JSON object")
	}
	p, ps, err := protocol.CheckProfile(m, schema)
	if err != nil {
		return err
	}
	signer, _, _ := strings.Cut(strings.TrimPrefix(p.Signature.KeyID, string(protocol.ActorService)+":"), "#")
	if !protocol.KeyBelongsTo(p.Signature.KeyID, protocol.ActorService, signer) || !s.org.isPolicyService(signer) {
		return protocol.Forbidden("profile %s is signed by %s, not by a registered Organization policy service", p.URI, p.Signature.KeyID).At("/signature/keyId")
	}
	if err := protocol.Verify(m, s.org); err != nil {
		return err
	}
	major, _ := p.Major()
	s.profiles.mu.Lock()
	defer s.profiles.mu.Unlock()
	if s.profiles.m == nil {
		s.profiles.m = map[string]*profileRecord{}
	}
	s.profiles.m[p.URI] = &profileRecord{profile: p, major: major, schema: ps}
	return nil
}

// checkPins refuses a Group pin of a profile that is not registered, or
// of another major version than the registered one.
func (r *profileRegistry) checkPins(pins []protocol.ProfilePin) error {
	seen := map[string]bool{}
	for i, pin := range pins {
		at := protocol.Pointer("payload", "extensionProfiles", strconv.Itoa(i))
		rec := r.get(pin.URI)
		switch {
		case seen[pin.URI]:
			return protocol.InvalidCommand("profile %s is pinned twice", pin.URI).At(at + "/uri")
		case rec == nil:
			return protocol.InvalidCommand("profile %s is not registered with this Organization", pin.URI).At(at + "/uri")
		case rec.major != pin.Major:
			return protocol.InvalidCommand("profile %s is registered at version %s, not major %d", pin.URI, rec.profile.Version, pin.Major).At(at + "/major")
		}
		seen[pin.URI] = true
	}
	return nil
}

// checkExtensions applies a Group's pins to a command's extensions: data
// under a pinned profile must conform to its schema; a critical extension
// under a profile the Group does not pin (at the registered major) is
// unknown to the Group. pins is nil outside a Group.
func (r *profileRegistry) checkExtensions(c *call, pins []protocol.ProfilePin) error {
	for uri, e := range c.cmd.Extensions {
		if protocol.KnownExtension(uri) {
			continue
		}
		rec := r.get(uri)
		pinned := rec != nil && pinnedAt(pins, uri, rec.major)
		at := protocol.Pointer("extensions", uri)
		switch {
		case pinned:
			data, err := protocol.Parse(e.Data, protocol.DecodeOptions{})
			if err != nil {
				return protocol.Errorf(protocol.CodeSchemaValidationFailed, "extension %s: %v", uri, err).At(at + "/data")
			}
			if err := rec.schema.Validate(data, at+"/data"); err != nil {
				return err
			}
		case e.Critical:
			return protocol.Errorf(protocol.CodeUnknownCriticalExtension, "critical extension %q: its profile is not pinned by this Group", uri).At(at)
		}
	}
	return nil
}

func pinnedAt(pins []protocol.ProfilePin, uri string, major uint64) bool {
	for _, p := range pins {
		if p.URI == uri && p.Major == major {
			return true
		}
	}
	return false
}

// groupPins is the pins of a Group's Mission.
func groupPins(g *group.Group) []protocol.ProfilePin {
	if g == nil {
		return nil
	}
	return g.Profiles
}

// checkGroupExtensions applies the Group's pins to a command; mission.create
// brings the pins of the Group it creates, checked against the registry.
func (r *profileRegistry) checkGroupExtensions(c *call, gs *groupState) error {
	pins := groupPins(gs.g)
	if pl, ok := c.payload.(*protocol.CreateMissionPayload); ok && gs.g.Mission == nil {
		if err := r.checkPins(pl.ExtensionProfiles); err != nil {
			return err
		}
		pins = pl.ExtensionProfiles
	}
	return r.checkExtensions(c, pins)
}
