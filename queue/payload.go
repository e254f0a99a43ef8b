package queue

import (
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// The view reads a Work Contract's scheduling inputs only (Entry.setContract)
// and an offer's candidates' agent ids only (group.Fold): the rest of a
// contract (goal, outputs, criteria, tools, budgets, retry policy) and each
// candidate's selection basis are most of the bytes of work.authorized and
// work.offer.created, so the projection decodes its own narrower types for
// those payloads and hands group.Fold the group type filled with what it
// read. Everything the view keeps is the same as from a full decode
// (TestSlimPayloadSameEntry); the full contract stays in the inbox
// (Store.Contract).

// schedContract is the part of a protocol.WorkContract Entry.setContract reads.
type schedContract struct {
	ContractID           string                             `json:"contractId"`
	Revision             uint64                             `json:"revision"`
	Dependencies         protocol.List[protocol.Dependency] `json:"dependencies"`
	ResourceLimits       protocol.ResourceLimits            `json:"resourceLimits"`
	RequiredCapabilities protocol.List[protocol.Capability] `json:"requiredCapabilities"`
	Deadline             protocol.Time                      `json:"deadline"`
	Urgency              protocol.Urgency                   `json:"urgency"`
	BusinessImpact       protocol.BusinessImpact            `json:"businessImpact"`
	Risk                 protocol.Risk                      `json:"risk"`
}

func (c *schedContract) contract() *protocol.WorkContract {
	if c == nil {
		return nil
	}
	return &protocol.WorkContract{
		ContractID: c.ContractID, Revision: c.Revision, Dependencies: c.Dependencies,
		ResourceLimits: c.ResourceLimits, RequiredCapabilities: c.RequiredCapabilities, Deadline: c.Deadline,
		Urgency: c.Urgency, BusinessImpact: c.BusinessImpact, Risk: c.Risk,
	}
}

// candidateID is the part of a protocol.OfferCandidate Fold reads.
type candidateID struct {
	AgentID string `json:"agentId"`
}

// A slimPayload is a decode target standing in for a group payload type:
// its members shadow the group type's of the same name (encoding/json
// prefers the shallower field), and payload returns the group value.
type slimPayload interface {
	payload() any
}

type slimAuthorized struct {
	*group.Authorized
	Contract *schedContract `json:"contract"`
}

func (p *slimAuthorized) payload() any {
	p.Authorized.Contract = p.Contract.contract()
	return p.Authorized
}

type slimContractRevised struct {
	*group.ContractRevised
	Contract *schedContract `json:"contract"`
}

func (p *slimContractRevised) payload() any {
	p.ContractRevised.Contract = p.Contract.contract()
	return p.ContractRevised
}

type slimOfferCreated struct {
	*group.OfferCreated
	Contract   *schedContract `json:"contract"`
	Candidates []candidateID  `json:"candidates"`
}

func (p *slimOfferCreated) payload() any {
	o := p.OfferCreated
	o.Contract = p.Contract.contract()
	if p.Candidates != nil {
		o.Candidates = make([]protocol.OfferCandidate, len(p.Candidates))
		for i, c := range p.Candidates {
			o.Candidates[i].AgentID = c.AgentID
		}
	}
	return o
}

// newPayload returns a decode target for the payload of a projected event
// type: a slimPayload or the group type itself.
func newPayload(typ protocol.EventType) (any, bool) {
	switch typ {
	case protocol.EvtWorkAuthorized:
		return &slimAuthorized{Authorized: new(group.Authorized)}, true
	case protocol.EvtWorkContractRevised:
		return &slimContractRevised{ContractRevised: new(group.ContractRevised)}, true
	case protocol.EvtWorkOfferCreated:
		return &slimOfferCreated{OfferCreated: new(group.OfferCreated)}, true
	}
	return group.NewPayload(typ)
}

// payloadOf returns the group payload a decode target of newPayload holds.
func payloadOf(v any) any {
	if s, ok := v.(slimPayload); ok {
		return s.payload()
	}
	return v
}

// decodePayload is group.Decode for the view: the same payload types and
// errors, with the members the view never reads left out.
func decodePayload(typ protocol.EventType, raw []byte) (any, error) {
	v, ok := newPayload(typ)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProtocolViolation, "unknown event type %s", typ)
	}
	if err := unmarshal(raw, v); err != nil {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s payload: %v", typ, err).At("/payload")
	}
	return payloadOf(v), nil
}
