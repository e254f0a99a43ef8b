package protocol

import (
	"encoding/json"
)

// ActorKind says who signed a Command or caused an Event.
type ActorKind string

// The three actor kinds (docs/wire.md).
const (
	ActorAgent   ActorKind = "agent"
	ActorHuman   ActorKind = "human"
	ActorService ActorKind = "service"
)

// Known reports whether k is one of the three actor kinds.
func (k ActorKind) Known() bool {
	return k == ActorAgent || k == ActorHuman || k == ActorService
}

// Actor identifies the principal behind a Command or Event.
type Actor struct {
	Kind ActorKind `json:"kind"`
	ID   string    `json:"id"`
}

// SignatureAlgEd25519 is the only signature algorithm of 0.1.
const SignatureAlgEd25519 = "Ed25519"

// Signature signs a Command, Event or Signed Document. The signing input is
// the JCS bytes of the whole object without signature.value; Value is
// omitted when empty so marshalling an unsigned object yields exactly that
// input.
type Signature struct {
	Alg       string `json:"alg"`
	KeyID     string `json:"keyId"`
	CreatedAt Time   `json:"createdAt"`
	Value     string `json:"value,omitempty"`
}

// Extension is one entry of an extensions member. Data (required, any JSON)
// is kept as the received bytes so an unknown non-critical extension is
// relayed unchanged (spec 17.4, 21). encoding/json re-encodes it compactly
// and escapes <, > and &, which leaves its JCS bytes, and hence signatures,
// unchanged. A nil Data marshals as null.
type Extension struct {
	Critical bool            `json:"critical"`
	Data     json.RawMessage `json:"data"`
}

// Extensions maps an extension profile URI to its entry.
type Extensions map[string]Extension

// Uint64 returns a pointer to v, for the optional epochs and revisions.
func Uint64(v uint64) *uint64 { return &v }

// Command is the signed request envelope (spec 15.1, docs/wire.md). The optional
// epochs are pointers because spec 15.1 makes their absence meaningful: an
// absent epoch and epoch 0 are different commands.
type Command struct {
	ActionID                   string          `json:"actionId"`
	ProtocolVersion            string          `json:"protocolVersion"`
	Actor                      Actor           `json:"actor"`
	Type                       CommandType     `json:"type"`
	GroupID                    string          `json:"groupId,omitempty"`
	SessionEpoch               *uint64         `json:"sessionEpoch,omitempty"`
	MembershipEpoch            *uint64         `json:"membershipEpoch,omitempty"`
	CoordinatorEpoch           *uint64         `json:"coordinatorEpoch,omitempty"`
	ExpectedRevision           *uint64         `json:"expectedRevision,omitempty"`
	CooperationOverrideGrantID string          `json:"cooperationOverrideGrantId,omitempty"`
	CorrelationID              string          `json:"correlationId"`
	IssuedAt                   Time            `json:"issuedAt"`
	Payload                    json.RawMessage `json:"payload"`
	Extensions                 Extensions      `json:"extensions,omitzero"`
	Signature                  Signature       `json:"signature"`
}

// AggregateKind names the kind of object an Event's revision belongs to.
type AggregateKind string

// The aggregate kinds (docs/shapes.md).
const (
	AggregateMission      AggregateKind = "mission"
	AggregateGroup        AggregateKind = "group"
	AggregateMembership   AggregateKind = "membership"
	AggregateConversation AggregateKind = "conversation"
	AggregateMessage      AggregateKind = "message"
	AggregateWorkItem     AggregateKind = "workItem"
	AggregateArtifact     AggregateKind = "artifact"
	AggregateApproval     AggregateKind = "approval"
	AggregatePolicy       AggregateKind = "policy"
	// AggregateContext is a Context Package; its revision is the version.
	AggregateContext AggregateKind = "contextPackage"
)

// Aggregate names the object whose revision an Event advances.
type Aggregate struct {
	Kind AggregateKind `json:"kind"`
	ID   string        `json:"id"`
}

// Event is an accepted, immutable fact (spec 15.2, docs/wire.md). Organization-
// scoped events omit GroupID, Sequence, Aggregate and Revision, so those are
// optional here; a Group event always carries all four.
type Event struct {
	EventID       string          `json:"eventId"`
	GroupID       string          `json:"groupId,omitempty"`
	Sequence      *uint64         `json:"sequence,omitempty"`
	Aggregate     *Aggregate      `json:"aggregate,omitempty"`
	Revision      *uint64         `json:"revision,omitempty"`
	Type          EventType       `json:"type"`
	Actor         Actor           `json:"actor"`
	CausationID   string          `json:"causationId"`
	CorrelationID string          `json:"correlationId"`
	OccurredAt    Time            `json:"occurredAt"`
	AcceptedBy    string          `json:"acceptedBy"`
	Payload       json.RawMessage `json:"payload"`
	// Extensions are the unknown non-critical extensions of the command
	// that caused the event, relayed unchanged (spec 17.4, 21).
	Extensions Extensions `json:"extensions,omitzero"`
	Signature  Signature  `json:"signature"`
}

// Seq returns the Group sequence, or 0 for an Organization-scoped event.
func (e *Event) Seq() uint64 {
	if e.Sequence == nil {
		return 0
	}
	return *e.Sequence
}

// Rev returns the aggregate revision, or 0 when absent.
func (e *Event) Rev() uint64 {
	if e.Revision == nil {
		return 0
	}
	return *e.Revision
}

// EventRef points at one event a Command produced. Organization-scoped
// events have no groupId or sequence.
type EventRef struct {
	EventID  string  `json:"eventId"`
	GroupID  string  `json:"groupId,omitempty"`
	Sequence *uint64 `json:"sequence,omitempty"`
}

// Receipt answers an accepted Command; a retry of the same (actor, actionId)
// with the same signed bytes gets the original receipt (spec 15.1).
type Receipt struct {
	ActionID string         `json:"actionId"`
	Events   List[EventRef] `json:"events"`
}

// List is a required JSON array: a nil List marshals as [] rather than null,
// so a Go value never puts null where the schema wants an array. It converts
// to and from []T without a cast.
type List[T any] []T

// MarshalJSON writes [] for a nil list.
func (l List[T]) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]T(l))
}
