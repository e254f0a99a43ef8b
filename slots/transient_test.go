package slots

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// What a handler is told when a request fails: a Go handler reads it with
// Transient, an external one in the error message's retryable and
// retryAfterMs members.
func TestTransientAnswers(t *testing.T) {
	unreachable := protocol.Errorf(protocol.CodeInternalError, "the authority was unreachable for 2m0s (37 tries)")
	unreachable.Details = map[string]any{"reason": "authority-unreachable", "tries": int64(37), "retryAfterMs": int64(200)}
	notRetryable := protocol.Errorf(protocol.CodeInternalError, "broken")
	notRetryable.Retryable = false
	for _, c := range []struct {
		name  string
		err   error
		wait  time.Duration
		again bool
		reply string
	}{
		{"authority unreachable past the grace", fmt.Errorf("slots: publish: %w", unreachable), 200 * time.Millisecond, true,
			`{"type":"error","id":"art-1","code":"INTERNAL_ERROR","message":"slots: publish: INTERNAL_ERROR: the authority was unreachable for 2m0s (37 tries)","retryable":true,"retryAfterMs":200,"about":"artifact"}`},
		{"rate limited, no wait named", protocol.Errorf(protocol.CodeRateLimited, "slow down"), 0, true,
			`{"type":"error","id":"art-1","code":"RATE_LIMITED","message":"RATE_LIMITED: slow down","retryable":true,"retryAfterMs":0,"about":"artifact"}`},
		{"a refusal", fmt.Errorf("slots: publish: %w", protocol.Errorf(protocol.CodeSchemaValidationFailed, "bad")), 0, false,
			`{"type":"error","id":"art-1","code":"SCHEMA_VALIDATION_FAILED","message":"slots: publish: SCHEMA_VALIDATION_FAILED: bad","retryable":false,"about":"artifact"}`},
		{"an internal error not marked retryable", notRetryable, 0, false,
			`{"type":"error","id":"art-1","code":"INTERNAL_ERROR","message":"INTERNAL_ERROR: broken","retryable":false,"about":"artifact"}`},
		{"a plain error", errors.New("disk full"), 0, false,
			`{"type":"error","id":"art-1","code":"INTERNAL_ERROR","message":"disk full","retryable":false,"about":"artifact"}`},
	} {
		wait, again := Transient(c.err)
		if wait != c.wait || again != c.again {
			t.Errorf("%s: Transient = %v %v, want %v %v", c.name, wait, again, c.wait, c.again)
		}
		b, err := json.Marshal(errorReply("art-1", "artifact", c.err))
		if err != nil || string(b) != c.reply {
			t.Errorf("%s: reply\n%s\nwant\n%s", c.name, b, c.reply)
		}
	}
}
