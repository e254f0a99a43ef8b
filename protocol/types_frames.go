package protocol

// Hello opens a session (spec 17, docs/wire.md). The client sends
// protocolVersions, agentId, sessionEpoch and proof; the server answers with
// protocolVersion, sessionEpoch and serverTime. One struct carries both
// forms; the members of the other form stay absent.
type Hello struct {
	Type             FrameType   `json:"type"`
	FrameID          string      `json:"frameId"`
	ProtocolVersions []string    `json:"protocolVersions,omitzero"` // client
	AgentID          string      `json:"agentId,omitempty"`         // client
	SessionEpoch     uint64      `json:"sessionEpoch"`              // both
	Proof            *HelloProof `json:"proof,omitempty"`           // client
	ProtocolVersion  string      `json:"protocolVersion,omitempty"` // server
	ServerTime       *Time       `json:"serverTime,omitempty"`      // server
	// Groups (server, ours: docs/wire.md) are the Groups the agent is an
	// active member of; absent from an authority that does not tell.
	Groups []string `json:"groups,omitzero"`
}

// HelloProof is the signed document that authenticates a HELLO: fresh within
// the allowed clock skew, with a nonce never used before.
type HelloProof struct {
	AgentID      string    `json:"agentId"`
	SessionEpoch uint64    `json:"sessionEpoch"`
	Nonce        string    `json:"nonce"`
	IssuedAt     Time      `json:"issuedAt"`
	Signature    Signature `json:"signature"`
}

// Subscribe asks for live delivery and replay of some Groups.
type Subscribe struct {
	Type    FrameType           `json:"type"`
	FrameID string              `json:"frameId"`
	Groups  List[GroupPosition] `json:"groups"`
}

// GroupPosition asks for the events of one Group after AfterSequence.
type GroupPosition struct {
	GroupID       string           `json:"groupId"`
	AfterSequence uint64           `json:"afterSequence"`
	Filter        *SubscribeFilter `json:"filter,omitempty"`
}

// SubscribeFilter narrows live delivery of a Group to some event types or
// WorkItems; it changes neither authorization nor durable history (spec
// 17.2), and replay is not filtered. Each present list has at least one entry.
type SubscribeFilter struct {
	Types       []EventType `json:"types,omitzero"`
	WorkItemIDs []string    `json:"workItemIds,omitzero"`
}

// CommandFrame carries one Command.
type CommandFrame struct {
	Type    FrameType `json:"type"`
	FrameID string    `json:"frameId"`
	Command *Command  `json:"command"`
}

// EventFrame carries one Event.
type EventFrame struct {
	Type    FrameType `json:"type"`
	FrameID string    `json:"frameId"`
	Event   *Event    `json:"event"`
}

// AckFrame has two forms. The server acknowledges a COMMAND with InReplyTo
// (the COMMAND's frameId) and Receipt; the client reports its durable
// progress with Cursors. The members of the other form stay absent.
type AckFrame struct {
	Type      FrameType `json:"type"`
	FrameID   string    `json:"frameId"`
	InReplyTo string    `json:"inReplyTo,omitempty"` // server
	Receipt   *Receipt  `json:"receipt,omitempty"`   // server
	Cursors   []Cursor  `json:"cursors,omitzero"`    // client
}

// Cursor is the highest contiguous sequence of a Group that the client has
// durably processed (spec 16).
type Cursor struct {
	GroupID  string `json:"groupId"`
	Sequence uint64 `json:"sequence"`
}

// Ping checks liveness and may carry a Presence Record; the peer echoes the
// nonce with Reply set.
type Ping struct {
	Type     FrameType       `json:"type"`
	FrameID  string          `json:"frameId"`
	Nonce    string          `json:"nonce"`
	Presence *PresenceRecord `json:"presence,omitempty"`
	Reply    bool            `json:"reply,omitempty"`
}

// ErrorFrame reports a failed frame or Command.
type ErrorFrame struct {
	Type      FrameType `json:"type"`
	FrameID   string    `json:"frameId"`
	Error     *Error    `json:"error"`
	InReplyTo string    `json:"inReplyTo,omitempty"`
}

// Backpressure pauses one Group; the peer retries after RetryAfterMs.
type Backpressure struct {
	Type         FrameType `json:"type"`
	FrameID      string    `json:"frameId"`
	GroupID      string    `json:"groupId"`
	RetryAfterMs uint64    `json:"retryAfterMs"`
}

// GroupsFrame (server only, ours: docs/wire.md) lists every Group the
// agent is an active member of, sent whenever that list changes while the
// agent is connected, so it can SUBSCRIBE a Group it has just joined.
type GroupsFrame struct {
	Type    FrameType `json:"type"`
	FrameID string    `json:"frameId"`
	Groups  []string  `json:"groups"`
}

// Known reports whether t is one of the eight frame types or GROUPS.
func (t FrameType) Known() bool {
	switch t {
	case FrameHello, FrameSubscribe, FrameCommand, FrameEvent, FrameAck,
		FramePing, FrameError, FrameBackpressure, FrameGroups:
		return true
	}
	return false
}

// newFrame returns a zero frame of type t, or nil for an unknown type.
func newFrame(t FrameType) any {
	switch t {
	case FrameHello:
		return &Hello{}
	case FrameSubscribe:
		return &Subscribe{}
	case FrameCommand:
		return &CommandFrame{}
	case FrameEvent:
		return &EventFrame{}
	case FrameAck:
		return &AckFrame{}
	case FramePing:
		return &Ping{}
	case FrameError:
		return &ErrorFrame{}
	case FrameBackpressure:
		return &Backpressure{}
	case FrameGroups:
		return &GroupsFrame{}
	}
	return nil
}

// DecodeFrameType reads the frame type from a value returned by Parse. A
// value that is not an object, lacks a string type or names an unknown
// frame is a PROTOCOL_VIOLATION.
func DecodeFrameType(v any) (FrameType, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", Errorf(CodeProtocolViolation, "frame is not a JSON object")
	}
	raw, present := obj["type"]
	if !present {
		return "", Errorf(CodeProtocolViolation, "frame has no type").At("/type")
	}
	s, ok := raw.(string)
	if !ok {
		return "", Errorf(CodeProtocolViolation, "frame type is not a string").At("/type")
	}
	t := FrameType(s)
	if !t.Known() {
		return "", Errorf(CodeProtocolViolation, "unknown frame type %q", s).At("/type")
	}
	return t, nil
}

// DecodeFrame decodes one frame whose bytes already passed the strict I-JSON
// checks (Parse) into *Hello, *Subscribe, *CommandFrame, *EventFrame,
// *AckFrame, *Ping, *ErrorFrame or *Backpressure. An unknown type, a member
// the frame does not define (compared case-sensitively), a null member, a
// wrong JSON kind, a time not in the wire form or a missing frame-level
// member is a PROTOCOL_VIOLATION with a JSON pointer. Payloads and extension
// data stay raw; finer rules (patterns, ranges, epochs) belong to the schema
// and command checks. encoding/json does not reject duplicate members, so the
// strict checks must come first.
func DecodeFrame(raw []byte) (any, error) {
	generic, err := decodeGeneric(raw)
	if err != nil {
		return nil, err
	}
	return DecodeFrameParsed(raw, generic)
}

// DecodeFrameParsed is DecodeFrame for a caller that already holds parsed,
// the value Parse returned for raw, and so saves a second generic decode.
func DecodeFrameParsed(raw []byte, parsed any) (any, error) {
	t, err := DecodeFrameType(parsed)
	if err != nil {
		return nil, err
	}
	frame := newFrame(t)
	if err := decodeExactParsed(raw, parsed, frame, CodeProtocolViolation); err != nil {
		return nil, err
	}
	if err := checkFrame(frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// checkFrame checks the members every frame of its type needs; the finer
// shape is the schema's business.
func checkFrame(frame any) error {
	missing := func(member string) error {
		return Errorf(CodeProtocolViolation, "frame lacks %s", member).At("/" + member)
	}
	switch f := frame.(type) {
	case *Hello:
		if f.FrameID == "" {
			return missing("frameId")
		}
		client := f.Proof != nil || f.ProtocolVersions != nil || f.AgentID != ""
		server := f.ProtocolVersion != "" || f.ServerTime != nil
		switch {
		case client && server:
			return Errorf(CodeProtocolViolation, "HELLO mixes client and server members")
		case client && f.Proof == nil:
			return missing("proof")
		case client && len(f.ProtocolVersions) == 0:
			return missing("protocolVersions")
		case client && f.AgentID == "":
			return missing("agentId")
		case server && (f.ProtocolVersion == "" || f.ServerTime == nil):
			return Errorf(CodeProtocolViolation, "server HELLO needs protocolVersion and serverTime")
		case !client && !server:
			return missing("proof")
		}
	case *Subscribe:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.Groups == nil {
			return missing("groups")
		}
	case *CommandFrame:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.Command == nil {
			return missing("command")
		}
	case *EventFrame:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.Event == nil {
			return missing("event")
		}
	case *AckFrame:
		if f.FrameID == "" {
			return missing("frameId")
		}
		server := f.InReplyTo != "" || f.Receipt != nil
		switch {
		case server && f.Cursors != nil:
			return Errorf(CodeProtocolViolation, "ACK mixes receipt and cursors")
		case server && (f.InReplyTo == "" || f.Receipt == nil):
			return Errorf(CodeProtocolViolation, "command ACK needs inReplyTo and receipt")
		case !server && f.Cursors == nil:
			return missing("cursors")
		}
	case *Ping:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.Nonce == "" {
			return missing("nonce")
		}
	case *ErrorFrame:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.Error == nil {
			return missing("error")
		}
	case *Backpressure:
		if f.FrameID == "" {
			return missing("frameId")
		}
		if f.GroupID == "" {
			return missing("groupId")
		}
	}
	return nil
}
