package slots

import (
	"encoding/base64"
	"encoding/json"

	"github.com/missionweave/mwp-worker/protocol"
)

// ExecProtocol names the JSON-lines protocol of external handlers
// (EXTERNAL.md); it is the start message's "protocol".
const ExecProtocol = "mwp-slot/1"

// MaxLineBytes bounds one line from an external handler.
const MaxLineBytes = 16 << 20

// Messages from the process (EXTERNAL.md). Every member name is exact;
// unknown members, wrong kinds and I-JSON breaches are refused.
type (
	progressMsg struct {
		Type     string            `json:"type"`
		Progress protocol.Progress `json:"progress"`
	}
	checkpointMsg struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		State string `json:"state"` // base64
		Phase string `json:"phase,omitempty"`
		Note  string `json:"note,omitempty"`
		state []byte
	}
	artifactMsg struct {
		Type           string                  `json:"type"`
		ID             string                  `json:"id"`
		MediaType      string                  `json:"mediaType"`
		Schema         string                  `json:"schema,omitempty"`
		Classification protocol.Classification `json:"classification,omitempty"`
		ToolVersions   map[string]string       `json:"toolVersions,omitempty"`
		Data           string                  `json:"data"` // base64
		data           []byte
	}
	riskMsg struct {
		Class             protocol.RiskClass `json:"class"`
		Irreversible      bool               `json:"irreversible,omitempty"`
		ExternallyVisible bool               `json:"externallyVisible,omitempty"`
	}
	toolCallMsg struct {
		Type       string          `json:"type"`
		ID         string          `json:"id"`
		OpID       string          `json:"opId"`
		Tool       string          `json:"tool"`
		Operation  string          `json:"operation"`
		Risk       riskMsg         `json:"risk"`
		SideEffect bool            `json:"sideEffect,omitempty"`
		Cost       *protocol.Usage `json:"cost,omitempty"`
	}
	toolDoneMsg struct {
		Type   string  `json:"type"`
		ID     string  `json:"id"`
		Output *string `json:"output,omitempty"` // base64
		Error  *string `json:"error,omitempty"`
		output []byte
	}
	chargeMsg struct {
		Type  string         `json:"type"`
		Usage protocol.Usage `json:"usage"`
	}
	blockMsg struct {
		Type       string              `json:"type"`
		Resolution protocol.Resolution `json:"resolution"`
		State      string              `json:"state,omitempty"` // base64
		state      []byte
	}
	preemptedMsg struct {
		Type string `json:"type"`
	}
	resultMsg struct {
		Type      string              `json:"type"`
		Artifacts []string            `json:"artifacts,omitempty"`
		Evidence  []protocol.Evidence `json:"evidence,omitempty"`
		Progress  *protocol.Progress  `json:"progress,omitempty"`
	}
	failMsg struct {
		Type      string `json:"type"`
		Reason    string `json:"reason"`
		Permanent bool   `json:"permanent,omitempty"`
	}
	// eventsMsg asks for events the Context Package cites (Work.CitedEvents).
	eventsMsg struct {
		Type         string `json:"type"`
		ID           string `json:"id"`
		FromSequence uint64 `json:"fromSequence,omitempty"`
		Max          int    `json:"max,omitempty"`
	}
	// fetchMsg asks for the bytes of one input artifact of the item, by
	// the contract input's name or by its digest (exactly one).
	fetchMsg struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Name   string `json:"name,omitempty"`
		Digest string `json:"digest,omitempty"`
	}
)

// decodeLine strictly decodes one line of process output. Every failure
// is a PROTOCOL_VIOLATION *protocol.Error saying what is wrong.
func decodeLine(line []byte) (any, error) {
	m, err := decodeMessage(line)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// parseLine strictly parses one line of program output as a JSON object.
func parseLine(line []byte) (parsed any, obj map[string]any, err error) {
	if parsed, err = protocol.Parse(line, protocol.DecodeOptions{MaxBytes: MaxLineBytes}); err != nil {
		return nil, nil, err
	}
	obj, ok := parsed.(map[string]any)
	if !ok {
		return nil, nil, violation("a line must be a JSON object")
	}
	return parsed, obj, nil
}

func decodeMessage(line []byte) (any, error) {
	parsed, obj, err := parseLine(line)
	if err != nil {
		return nil, err
	}
	typ, _ := obj["type"].(string)
	var m any
	switch typ {
	case "progress":
		m = &progressMsg{}
	case "checkpoint":
		m = &checkpointMsg{}
	case "artifact":
		m = &artifactMsg{}
	case "toolCall":
		m = &toolCallMsg{}
	case "toolDone":
		m = &toolDoneMsg{}
	case "charge":
		m = &chargeMsg{}
	case "block":
		m = &blockMsg{}
	case "preempted":
		m = &preemptedMsg{}
	case "result":
		m = &resultMsg{}
	case "fail":
		m = &failMsg{}
	case "events":
		m = &eventsMsg{}
	case "fetch":
		m = &fetchMsg{}
	default:
		return nil, violation("unknown message type %q", typ)
	}
	if err := protocol.DecodeExactParsed(line, parsed, m, protocol.CodeProtocolViolation); err != nil {
		return nil, err
	}
	need := func(ok bool, what string) error {
		if !ok {
			return violation("%s message: %s", typ, what)
		}
		return nil
	}
	has := func(name string) bool { _, ok := obj[name]; return ok }
	switch m := m.(type) {
	case *progressMsg:
		return m, need(has("progress") && m.Progress.Phase != "", "progress with a phase is required")
	case *checkpointMsg:
		if err := need(m.ID != "" && has("state"), "id and state are required"); err != nil {
			return nil, err
		}
		m.state, err = unbase64(m.State, "state")
		return m, err
	case *artifactMsg:
		if err := need(m.ID != "" && m.MediaType != "" && has("data"), "id, mediaType and data are required"); err != nil {
			return nil, err
		}
		m.data, err = unbase64(m.Data, "data")
		return m, err
	case *toolCallMsg:
		return m, need(m.ID != "" && m.OpID != "" && m.Tool != "" && m.Operation != "" && m.Risk.Class.Known(),
			"id, opId, tool, operation and a known risk class are required")
	case *toolDoneMsg:
		if err := need(m.ID != "" && (m.Output == nil) != (m.Error == nil), "id and exactly one of output and error are required"); err != nil {
			return nil, err
		}
		if m.Output != nil {
			m.output, err = unbase64(*m.Output, "output")
		}
		return m, err
	case *chargeMsg:
		return m, need(has("usage") && finite(m.Usage), "a finite, non-negative usage is required")
	case *blockMsg:
		if err := need(has("resolution") && m.Resolution.Detail != "", "a resolution with a detail is required"); err != nil {
			return nil, err
		}
		m.state, err = unbase64(m.State, "state")
		return m, err
	case *failMsg:
		return m, need(m.Reason != "", "a reason is required")
	case *eventsMsg:
		return m, need(m.ID != "" && m.Max >= 0, "an id and a non-negative max are required")
	case *fetchMsg:
		return m, need(m.ID != "" && (m.Name == "") != (m.Digest == ""), "id and exactly one of name and digest are required")
	}
	return m, nil
}

func unbase64(s, name string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, violation("%s is not standard base64: %v", name, err)
	}
	return b, nil
}

func violation(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodeProtocolViolation, format, args...)
}

// Messages to the process.
type (
	startMsg struct {
		Type     string                `json:"type"`
		Protocol string                `json:"protocol"`
		Slot     slotMsg               `json:"slot"`
		Contract protocol.WorkContract `json:"contract"`
		Context  json.RawMessage       `json:"context"`
		// Extensions are the offer's (Work.Extensions), absent when none.
		Extensions protocol.Extensions `json:"extensions,omitzero"`
		Resume     *resumeMsg          `json:"resume"`
	}
	slotMsg struct {
		GroupID        string `json:"groupId"`
		MissionID      string `json:"missionId"`
		WorkItemID     string `json:"workItemId"`
		OwnershipEpoch uint64 `json:"ownershipEpoch"`
		LeaseID        string `json:"leaseId"`
		Attempt        uint64 `json:"attempt"`
		// Agent is the worker's actor: the producer the handler names in
		// its Evidence.
		Agent protocol.Actor `json:"agent"`
	}
	resumeMsg struct {
		CheckpointID string `json:"checkpointId"`
		Digest       string `json:"digest"`
		Phase        string `json:"phase,omitempty"`
		Note         string `json:"note,omitempty"`
		State        string `json:"state"`
	}
	// replyMsg carries every host→process message but start.
	replyMsg struct {
		Type         string        `json:"type"`
		ID           string        `json:"id,omitempty"`
		Reason       string        `json:"reason,omitempty"`       // preempt
		CheckpointID string        `json:"checkpointId,omitempty"` // checkpointed
		Digest       string        `json:"digest,omitempty"`       // checkpointed, published, fetched
		Key          string        `json:"key,omitempty"`          // toolGo
		Output       *string       `json:"output,omitempty"`       // toolResult
		Name         string        `json:"name,omitempty"`         // fetched
		Data         *string       `json:"data,omitempty"`         // fetched
		Code         protocol.Code `json:"code,omitempty"`         // error
		Message      string        `json:"message,omitempty"`      // error
		Retryable    *bool         `json:"retryable,omitempty"`    // error: always present
		RetryAfterMs *int64        `json:"retryAfterMs,omitempty"` // error, when retryable
		About        string        `json:"about,omitempty"`        // error without id
		// Events are the cited events as the authority signed them (events).
		Events *[]json.RawMessage `json:"events,omitempty"`
	}
)

// errorReply is the error message answering a request: its code, and
// whether the same request may be sent again unchanged (Transient), with
// the wait suggested.
func errorReply(id, about string, err error) replyMsg {
	wait, again := Transient(err)
	m := replyMsg{Type: "error", ID: id, About: about, Code: protocol.CodeOf(err), Message: err.Error(), Retryable: &again}
	if again {
		ms := wait.Milliseconds()
		m.RetryAfterMs = &ms
	}
	return m
}
