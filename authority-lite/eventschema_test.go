package authoritylite

import (
	"context"
	"errors"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// The authority validates every event it seals before signing it: a
// decided event whose payload does not fit its type's schema, or whose
// aggregate kind is not its type's, is INTERNAL_ERROR (the problems in its
// details) and nothing of the decision is committed. As for any failed
// seal, the writer then refuses further writes (memory may be ahead of the
// log) until the service is reopened from the log.
func TestSealValidatesEvents(t *testing.T) {
	tests := []struct {
		name        string
		draft       group.EventDraft
		wantPointer string
	}{
		{"payload not its type", group.EventDraft{Type: protocol.EvtWorkCancelled,
			Aggregate: protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: "wi-x"}, Revision: 1, Actor: owner,
			Payload: &group.Cancelled{Reason: "the WorkRef is missing"}}, "/payload/state"},
		{"aggregate kind not its type", group.EventDraft{Type: protocol.EvtWorkCancelled,
			Aggregate: protocol.Aggregate{Kind: protocol.AggregateMission, ID: "wi-x"}, Revision: 1, Actor: owner,
			Payload: &group.Cancelled{WorkRef: group.WorkRef{WorkItemID: "wi-x", State: protocol.WorkCancelled}}}, "/aggregate/kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			before := checkLog(t, k.s, "grp-a")
			gs := k.s.group("grp-a")
			c := &call{s: k.s, cmd: &protocol.Command{ActionID: "act-bad", CorrelationID: "mis-a", Actor: owner}, now: k.clk.Now()}
			gs.mu.Lock()
			_, wait, err := k.s.commit(c, gs, &pending{drafts: []group.EventDraft{tc.draft}})
			gs.mu.Unlock()
			if err == nil {
				err = wait() // events are signed, and so validated, after the lock
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInternalError || pe.Pointer != tc.wantPointer || pe.Details["problems"] == nil {
				t.Fatalf("want INTERNAL_ERROR at %s with the problems, got %v (%+v)", tc.wantPointer, err, pe)
			}
			if got := checkLog(t, k.s, "grp-a"); len(got) != len(before) {
				t.Fatalf("log grew from %d to %d events", len(before), len(got))
			}
			// Nothing more is written until the service reopens from its log.
			k.refuse(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "msg-1", ConversationID: "cnv-1", Text: "hi"}, protocol.CodeInternalError)
			k.s.Close()
			k.s = openSvc(t, k.dir, k.clk, k.akey)
			if got := checkLog(t, k.s, "grp-a"); len(got) != len(before) {
				t.Fatalf("after reopen: %d events, want %d", len(got), len(before))
			}
			w1 := k.s.Principal(agent("w1"), k.w["w1"].Key)
			if _, err := w1.Do(context.Background(), protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "msg-1", ConversationID: "cnv-1", Text: "hi"}); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
			if k.s.LastSequence("grp-a") != uint64(len(before))+1 {
				t.Fatalf("after reopen: sequence %d, want %d", k.s.LastSequence("grp-a"), len(before)+1)
			}
		})
	}
}
