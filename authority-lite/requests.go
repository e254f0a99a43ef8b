package authoritylite

import (
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The checks behind the HTTPS routes (authority-lite/httpapi, docs/wire.md
// "HTTPS routes"). Authentication is the HELLO proof's, for any principal;
// authorization is the binding's: active membership, and GROUP_NOT_FOUND
// for a Group one may not know.

// nonceOwner names a principal in the nonce store: an agent by its id, as
// HELLO does, anyone else as kind/id ('/' is never in an id, so the two
// cannot collide).
func nonceOwner(a protocol.Actor) string {
	if a.Kind == protocol.ActorAgent {
		return a.ID
	}
	return string(a.Kind) + "/" + a.ID
}

// AuthenticateRequest checks a request proof (decoded by
// protocol.DecodeRequestProof, doc its parsed form) for a request with
// method and target: signed by a key of its actor, fresh within the skew, a
// nonce never used before (shared with HELLO). An unknown principal, a key
// not its own, a bad signature, a stale proof and a proof for another
// request get one answer, as at HELLO.
func (s *Service) AuthenticateRequest(p *protocol.RequestProof, doc map[string]any, method, target string) (protocol.Actor, error) {
	refused := protocol.Errorf(protocol.CodeAuthInvalidSignature,
		"request proof not accepted: unknown principal, a key not its own, a bad signature, an issuedAt outside the clock skew or another request").At("/" + protocol.RequestProofHeader)
	if p.Method != method || p.Target != target {
		return protocol.Actor{}, refused
	}
	if p.Actor.Kind == protocol.ActorAgent && s.org.agent(p.Actor.ID) == nil {
		return protocol.Actor{}, refused
	}
	now := s.clock.Now()
	skew := s.skew()
	if err := protocol.VerifyFresh(doc, s.org, now, skew); err != nil {
		return protocol.Actor{}, refused
	}
	if !protocol.KeyBelongsTo(p.Signature.KeyID, p.Actor.Kind, p.Actor.ID) {
		return protocol.Actor{}, refused
	}
	if err := s.useNonce(nonceOwner(p.Actor), p.Nonce, now, skew); err != nil {
		return protocol.Actor{}, protocol.Errorf(protocol.CodeAuthInvalidSignature, "request proof nonce was already used").At("/" + protocol.RequestProofHeader + "/nonce")
	}
	return p.Actor, nil
}

// skew is the allowed clock skew of issuedAt (Config.MaxSkew).
func (s *Service) skew() time.Duration {
	if s.cfg.MaxSkew != 0 {
		return s.cfg.MaxSkew
	}
	return protocol.DefaultMaxSkew
}

// AuthorizeActor lets an active member (or a registered policy service)
// read a Group: GROUP_NOT_FOUND for unknown and forbidden Groups alike.
func (s *Service) AuthorizeActor(a protocol.Actor, groupID string) error {
	notFound := protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", groupID)
	gs := s.peekGroup(groupID)
	if gs == nil {
		return notFound
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ok := mayKnow(s.org, a, gs)
	// A damaged Group says so to its members, and to anyone when its
	// members could not be read.
	if err := s.integrity.damage(groupID); err != nil && (ok || len(gs.members) == 0) {
		return err
	}
	if !ok {
		return notFound
	}
	return nil
}

// MissionGroup returns the Group of a Mission for a principal who may know
// it; any other gets the answer for an unknown Mission.
func (s *Service) MissionGroup(a protocol.Actor, missionID string) (string, error) {
	for _, id := range s.GroupIDs() {
		gs := s.peekGroup(id)
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		match := gs.g.Mission != nil && gs.g.Mission.MissionID == missionID && mayKnow(s.org, a, gs)
		gs.mu.Unlock()
		if match {
			return id, nil
		}
	}
	return "", protocol.Errorf(protocol.CodeGroupNotFound, "mission %s not found", missionID).At("/missionId")
}

// MayPutArtifact authorizes an upload: by tok, the capability token of an
// execution lease of a that is current now, or else by a's active
// membership of some Group (a principal that belongs nowhere may not fill
// the store).
func (s *Service) MayPutArtifact(a protocol.Actor, tok *protocol.CapabilityToken) error {
	if tok != nil {
		return s.checkToken(a, tok)
	}
	for _, id := range s.GroupIDs() {
		gs := s.peekGroup(id)
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		ok := mayKnow(s.org, a, gs)
		gs.mu.Unlock()
		if ok {
			return nil
		}
	}
	return protocol.Forbidden("%s %s is an active member of no Group; an upload needs a membership or a lease's capability token", a.Kind, a.ID)
}

// checkToken accepts a capability token signed by this authority, issued to
// a, not expired, and naming the current execution lease of its WorkItem.
func (s *Service) checkToken(a protocol.Actor, tok *protocol.CapabilityToken) error {
	now := s.clock.Now()
	if err := protocol.CheckCapabilityToken(tok, protocol.NewKeySet(s.key.Public()), "", now); err != nil {
		return err
	}
	if a.Kind != protocol.ActorAgent || tok.AgentID != a.ID {
		return protocol.Forbidden("the capability token was issued to agent %s, not %s %s", tok.AgentID, a.Kind, a.ID)
	}
	w, ok := s.WorkItem(tok.GroupID, tok.WorkItemID)
	if !ok {
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "capability token %s names no current lease", tok.TokenID)
	}
	return w.CheckLease(a.ID, nil, tok.OwnershipEpoch, tok.LeaseID, now)
}

// ReadArtifact returns stored bytes to a principal allowed to read them: a
// member of a Group where they are published, or the holder of a current
// lease's token in such a Group. Every other principal gets the answer for
// bytes that are not stored, so a digest cannot be probed.
func (s *Service) ReadArtifact(a protocol.Actor, tok *protocol.CapabilityToken, digest string) ([]byte, error) {
	if _, err := s.artifactPath(digest); err != nil {
		return nil, err
	}
	missing := protocol.Errorf(protocol.CodeInvalidCommand, "artifact %s is not in the store", digest)
	var groups []string
	if tok != nil {
		if err := s.checkToken(a, tok); err != nil {
			return nil, err
		}
		groups = []string{tok.GroupID}
	} else {
		groups = s.GroupIDs()
	}
	allowed := slices.ContainsFunc(groups, func(id string) bool {
		gs := s.peekGroup(id) // a released Group keeps its artifact revisions
		if gs == nil {
			return false
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		return gs.artifacts[digest] > 0 && (tok != nil || mayKnow(s.org, a, gs))
	})
	if !allowed {
		return nil, missing
	}
	return s.Artifact(digest)
}
