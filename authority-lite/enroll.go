package authoritylite

import (
	"context"
	"encoding/json"

	"github.com/missionweave/mwp-worker/protocol"
)

// Enrolled answers an Organization registration of an Agent Card.
type Enrolled struct {
	AgentID       string `json:"agentId"`
	AgentCardHash string `json:"agentCardHash"`
	EventID       string `json:"eventId"`
}

// Enroll registers an Agent Card with the running authority for the
// Organization: the operator's `mwp-worker authority enroll`, over the
// authority's local socket. registration is an agent_card_register signed
// by a registered policy service and goes through Submit like any command
// (signature, key, freshness; the card's own signature by its keys).
// enrollment, when the card came from one, is the agent's enrollment
// document: it must be one still valid by the rule of Submit (its issuedAt
// within the skew, or its enrollment extension's validUntil) and carry the
// same card, so a stale enrollment is refused here as it would be anywhere.
func (s *Service) Enroll(ctx context.Context, registration, enrollment []byte) (Enrolled, error) {
	var reg struct {
		Payload protocol.RegisterAgentCardPayload `json:"payload"`
	}
	if err := json.Unmarshal(registration, &reg); err != nil {
		return Enrolled{}, protocol.Errorf(protocol.CodeProtocolViolation, "registration: %v", err)
	}
	if enrollment != nil {
		keys, _ := s.cardKeys(enrollment)
		if keys == nil {
			return Enrolled{}, protocol.InvalidCommand("the enrollment is not an agent's agent_card_register")
		}
		inbound := s.inbound
		inbound.Keys = keys
		in, err := inbound.DecodeCommand(enrollment, s.clock.Now())
		if err != nil {
			return Enrolled{}, err
		}
		var p protocol.RegisterAgentCardPayload
		if err := json.Unmarshal(in.Command.Payload, &p); err != nil {
			return Enrolled{}, protocol.InvalidCommand("enrollment payload: %v", err).At("/payload")
		}
		if a, b := cardDigest(p.AgentCard), cardDigest(reg.Payload.AgentCard); a == "" || a != b {
			return Enrolled{}, protocol.InvalidCommand("the registration does not carry the enrollment's card").At("/payload/agentCard")
		}
	}
	r, err := s.Submit(ctx, "", registration)
	if err != nil {
		return Enrolled{}, err
	}
	out := Enrolled{AgentID: reg.Payload.AgentCard.AgentID, AgentCardHash: cardDigest(reg.Payload.AgentCard)}
	if len(r.Events) > 0 {
		out.EventID = r.Events[0].EventID
	}
	return out, nil
}

// cardDigest is the card hash session_open names: the digest of the card's
// JCS bytes, signature included ("" when it does not encode).
func cardDigest(card protocol.AgentCard) string {
	raw, err := protocol.Marshal(card)
	if err != nil {
		return ""
	}
	return protocol.Digest(raw)
}
