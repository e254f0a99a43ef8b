package wss

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// headsBackend is the fake authority with Heads: a Group's head is its
// last event.
type headsBackend struct{ *fakeBackend }

func (h headsBackend) Head(groupID string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.groups[groupID]
	if !ok {
		return 0, false
	}
	return uint64(len(g.events)), true
}

// A position past a Group's log, in a SUBSCRIBE or an ACK, is a client that
// followed history this authority no longer holds (restored from an older
// copy): PROTOCOL_VIOLATION ahead_of_log naming the Group and the log's
// last sequence, and no stream, no recorded cursor. A position within the
// log is served as before, and a Group the peer may not read still says
// only GROUP_NOT_FOUND (SUBSCRIBE) or nothing (ACK).
func TestPositionPastTheLog(t *testing.T) {
	cases := []struct {
		name      string
		frame     string // %d: the position
		group     string
		pos       uint64
		wantAhead bool
		wantCode  protocol.Code // an error other than ahead_of_log; "" none
	}{
		{"subscribe within the log", `{"type":"SUBSCRIBE","frameId":"f1","groups":[{"groupId":"%s","afterSequence":%d}]}`, "grp-a", 2, false, ""},
		{"subscribe at the head", `{"type":"SUBSCRIBE","frameId":"f1","groups":[{"groupId":"%s","afterSequence":%d}]}`, "grp-a", 5, false, ""},
		{"subscribe past the head", `{"type":"SUBSCRIBE","frameId":"f1","groups":[{"groupId":"%s","afterSequence":%d}]}`, "grp-a", 6, true, ""},
		{"subscribe past the head of a Group not readable", `{"type":"SUBSCRIBE","frameId":"f1","groups":[{"groupId":"%s","afterSequence":%d}]}`, "grp-b", 9, false, protocol.CodeGroupNotFound},
		{"ack within the log", `{"type":"ACK","frameId":"f1","cursors":[{"groupId":"%s","sequence":%d}]}`, "grp-a", 5, false, ""},
		{"ack past the head", `{"type":"ACK","frameId":"f1","cursors":[{"groupId":"%s","sequence":%d}]}`, "grp-a", 7, true, ""},
		{"ack past the head of a Group not readable", `{"type":"ACK","frameId":"f1","cursors":[{"groupId":"%s","sequence":%d}]}`, "grp-b", 9, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := newFakeBackend(t)
			key := fb.addAgent(t, "w1", 3)
			fb.addGroup("grp-a", "w1")
			fb.addGroup("grp-b")
			fb.appendEvents(t, "grp-a", 5, protocol.EvtMessagePosted, "")
			fb.appendEvents(t, "grp-b", 2, protocol.EvtMessagePosted, "")
			k := &sessionKit{fb: fb, key: key, s: newSession(headsBackend{fb}, newFrameIDs(), 4096, slog.New(slog.DiscardHandler))}
			k.open(t)
			out, fs := k.text(t, []byte(fmt.Sprintf(c.frame, c.group, c.pos)))
			switch {
			case c.wantAhead:
				e := onlyError(t, fs)
				d := e.Error.Details
				if e.Error.Code != protocol.CodeProtocolViolation || e.Error.Retryable || e.InReplyTo != "f1" || d["reason"] != ReasonAheadOfLog ||
					d["groupId"] != c.group || fmt.Sprint(d["sequence"]) != fmt.Sprint(c.pos) || fmt.Sprint(d["lastSequence"]) != "5" {
					t.Fatalf("refusal %+v", e.Error)
				}
				if len(out.subscribe) != 0 || fb.ackedAt("w1", c.group) != 0 {
					t.Fatalf("a position past the log was served: streams %+v, acked %d", out.subscribe, fb.ackedAt("w1", c.group))
				}
			case c.wantCode != "":
				if e := onlyError(t, fs); e.Error.Code != c.wantCode || e.Error.Details["lastSequence"] != nil {
					t.Fatalf("got %+v, want %s saying nothing more", e.Error, c.wantCode)
				}
			default:
				if len(fs) != 0 {
					t.Fatalf("refused: %+v", fs)
				}
			}
		})
	}
}
