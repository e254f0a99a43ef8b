package group

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/missionweave/mwp-worker/protocol"
)

// EventRule is what every producer and consumer must agree on about one
// event type: the aggregate kind it is on ("" for Organization-scoped
// events) and its payload's Go type.
type EventRule struct {
	Aggregate protocol.AggregateKind
	Payload   reflect.Type
}

func rule[T any](kind protocol.AggregateKind) EventRule {
	return EventRule{Aggregate: kind, Payload: reflect.TypeFor[T]()}
}

// Events is the one table of event types this implementation emits and
// reads: the 36 core types of spec 15.2 and the ext.* types.
var Events = map[protocol.EventType]EventRule{
	protocol.EvtMissionCreated:              rule[MissionCreated](protocol.AggregateMission),
	protocol.EvtMissionCoordinatorAssigned:  rule[CoordinatorAssigned](protocol.AggregateMission),
	protocol.EvtMissionCoordinatorRenewed:   rule[CoordinatorRenewed](protocol.AggregateMission),
	protocol.EvtMissionSubmittedForApproval: rule[SubmittedForApproval](protocol.AggregateMission),
	protocol.EvtMissionApproved:             rule[MissionApproved](protocol.AggregateMission),
	protocol.EvtMissionChangesRequested:     rule[ChangesRequested](protocol.AggregateMission),
	protocol.EvtMissionCancelled:            rule[MissionClosed](protocol.AggregateMission),
	protocol.EvtMissionTerminated:           rule[MissionClosed](protocol.AggregateMission),
	protocol.EvtMissionChildCreated:         rule[ChildCreated](protocol.AggregateMission),
	protocol.EvtMissionFollowUpCreated:      rule[FollowUpCreated](protocol.AggregateMission),

	protocol.EvtMembershipChanged:           rule[protocol.Membership](protocol.AggregateMembership),
	protocol.EvtMembershipEnded:             rule[protocol.Membership](protocol.AggregateMembership),
	protocol.EvtMembershipDelegationGranted: rule[protocol.Membership](protocol.AggregateMembership),

	protocol.EvtMessagePosted:    rule[MessageEvent](protocol.AggregateMessage),
	protocol.EvtMessageCorrected: rule[MessageEvent](protocol.AggregateMessage),
	protocol.EvtMessageRetracted: rule[MessageEvent](protocol.AggregateMessage),
	protocol.EvtMessageRedacted:  rule[MessageEvent](protocol.AggregateMessage),

	protocol.EvtWorkProposed:             rule[Proposed](protocol.AggregateWorkItem),
	protocol.EvtWorkAuthorized:           rule[Authorized](protocol.AggregateWorkItem),
	protocol.EvtWorkOfferCreated:         rule[OfferCreated](protocol.AggregateWorkItem),
	protocol.EvtWorkOfferAccepted:        rule[OfferAccepted](protocol.AggregateWorkItem),
	protocol.EvtWorkContractRevised:      rule[ContractRevised](protocol.AggregateWorkItem),
	protocol.EvtWorkStarted:              rule[Started](protocol.AggregateWorkItem),
	protocol.EvtWorkProgressed:           rule[Progressed](protocol.AggregateWorkItem),
	protocol.EvtWorkCheckpointed:         rule[Checkpointed](protocol.AggregateWorkItem),
	protocol.EvtWorkBlocked:              rule[Blocked](protocol.AggregateWorkItem),
	protocol.EvtWorkUnblocked:            rule[Unblocked](protocol.AggregateWorkItem),
	protocol.EvtWorkSubmitted:            rule[Submitted](protocol.AggregateWorkItem),
	protocol.EvtWorkResultAccepted:       rule[ResultAccepted](protocol.AggregateWorkItem),
	protocol.EvtWorkFailed:               rule[Failed](protocol.AggregateWorkItem),
	protocol.EvtWorkCancelled:            rule[Cancelled](protocol.AggregateWorkItem),
	protocol.EvtApprovalExecutionGranted: rule[ExecutionGranted](protocol.AggregateWorkItem),

	protocol.EvtArtifactPublished:                rule[ArtifactPublished](protocol.AggregateArtifact),
	protocol.EvtPolicyCooperationOverrideGranted: rule[protocol.CooperationOverrideGrant](protocol.AggregatePolicy),
	protocol.EvtCooperationOverrideConsumed:      rule[OverrideConsumed](protocol.AggregatePolicy),
	protocol.EvtGroupSnapshotCreated:             rule[SnapshotCreated](protocol.AggregateGroup),
	protocol.EvtGroupArchived:                    rule[GroupArchived](protocol.AggregateGroup),
	protocol.EvtResourceUsageRecorded:            rule[UsageRecorded](protocol.AggregateWorkItem),
	protocol.EvtContextPublished:                 rule[ContextPublished](protocol.AggregateContext),

	protocol.EvtAgentCardRegistered: rule[AgentCardRegistered](""),
	protocol.EvtSessionOpened:       rule[protocol.OpenSessionPayload](""),
}

// Decode returns the typed payload of an event of type typ: a pointer to
// the Go type Events names. An unknown type is PROTOCOL_VIOLATION: a reader
// cannot follow what it cannot type.
func Decode(typ protocol.EventType, payload []byte) (any, error) {
	v, ok := NewPayload(typ)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProtocolViolation, "unknown event type %s", typ)
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s payload: %v", typ, err).At("/payload")
	}
	return v, nil
}

// NewPayload returns a pointer to a new zero payload of event type typ, to
// decode into, or false for a type Events does not name.
func NewPayload(typ protocol.EventType) (any, bool) {
	r, ok := Events[typ]
	if !ok {
		return nil, false
	}
	return reflect.New(r.Payload).Interface(), true
}

// DecodeAs decodes an event's payload as T, which must be the type Events
// names for the event's type.
func DecodeAs[T any](ev *protocol.Event) (*T, error) {
	v, err := Decode(ev.Type, ev.Payload)
	if err != nil {
		return nil, err
	}
	p, ok := v.(*T)
	if !ok {
		return nil, fmt.Errorf("%s payload is %T, not %T", ev.Type, v, p)
	}
	return p, nil
}

// OwnershipOf returns the ownership grant a WorkItem payload carries, or
// nil: readers that follow owners need not know which types carry one.
func OwnershipOf(payload any) *protocol.OwnershipGrant {
	switch p := payload.(type) {
	case *OfferAccepted:
		return p.Ownership
	case *Started:
		return p.Ownership
	case *Checkpointed:
		return p.Ownership
	case *Blocked:
		return p.Ownership
	case *Unblocked:
		return p.Ownership
	case *Submitted:
		return p.Ownership
	case *Failed:
		return p.Ownership
	}
	return nil
}

// LeaseOf returns the execution lease a WorkItem payload carries (a new
// lease or a renewal), or nil.
func LeaseOf(payload any) *protocol.ExecutionLease {
	switch p := payload.(type) {
	case *Started:
		return p.Lease
	case *Progressed:
		return p.Lease
	}
	return nil
}

// CapabilityTokenOf returns the capability token issued with a lease, or nil.
func CapabilityTokenOf(payload any) *protocol.CapabilityToken {
	switch p := payload.(type) {
	case *Started:
		return p.CapabilityToken
	case *Progressed:
		return p.CapabilityToken
	}
	return nil
}

// ContractOf returns the Work Contract a WorkItem payload carries in full
// (work.authorized, work.offer.created, work.contract.revised), or nil.
func ContractOf(payload any) *protocol.WorkContract {
	switch p := payload.(type) {
	case *Authorized:
		return p.Contract
	case *OfferCreated:
		return p.Contract
	case *ContractRevised:
		return p.Contract
	}
	return nil
}
