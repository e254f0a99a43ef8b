package runtime

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// submitDecision is the decision Status records about item id's refused
// submission, "" while there is none.
func submitDecision(s WorkerStatus, id string) string {
	for _, o := range s.Outcomes {
		if o.WorkItemID == id && o.Sent == string(protocol.CmdWorkSubmit) && o.Decision != "" {
			return o.Decision
		}
	}
	return ""
}

// A refusal received over the wire carries its JSON pointer in its
// details; the worker's log line and work.fail reason name it.
func TestRefusalTextNamesThePointer(t *testing.T) {
	wire := &protocol.Error{Code: protocol.CodeSchemaValidationFailed, Message: "string must not be empty",
		Details: map[string]any{"pointer": "/payload/progress/nextCheckpoint"}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{wire, "SCHEMA_VALIDATION_FAILED: /payload/progress/nextCheckpoint: string must not be empty"},
		{protocol.Errorf(protocol.CodeInvalidCommand, "bad").At("/payload/x"), "INVALID_COMMAND: /payload/x: bad"},
		{protocol.Errorf(protocol.CodeInvalidCommand, "bad"), "INVALID_COMMAND: bad"},
	} {
		if got := refusalText(c.err); got != c.want {
			t.Errorf("refusalText = %q, want %q", got, c.want)
		}
	}
	if wire.Pointer != "" {
		t.Error("refusalText changed the error it was given")
	}
}
