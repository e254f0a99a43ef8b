package group

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// FromWire keeps the event's aggregate and revision; an Organization-scoped
// event has neither.
func TestFromWireKeepsAggregate(t *testing.T) {
	payload := []byte(`{"messageId":"m1","author":{"kind":"agent","id":"w1"},"state":"posted"}`)
	agg := protocol.Aggregate{Kind: protocol.AggregateMessage, ID: "m1"}
	for _, tc := range []struct {
		name string
		agg  *protocol.Aggregate
		rev  *uint64
		want protocol.Aggregate
	}{
		{"group event", &agg, protocol.Uint64(3), agg},
		{"no aggregate", nil, nil, protocol.Aggregate{}},
	} {
		ev := &protocol.Event{Type: protocol.EvtMessagePosted, Aggregate: tc.agg, Revision: tc.rev, Payload: payload}
		got, err := FromWire(ev)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Aggregate != tc.want || got.Revision != ev.Rev() || got.Type != protocol.EvtMessagePosted {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// A child Mission that ends without approval fails or blocks its parent
// WorkItem with a reason naming the child, its state and its own reason.
func TestChildOutcomeReason(t *testing.T) {
	for _, tc := range []struct {
		policy protocol.ChildFailurePolicy
		reason string
		want   string
	}{
		{protocol.ChildFailureFail, "out of budget", "child Mission mis-c cancelled: out of budget"},
		{protocol.ChildFailureFail, "", "child Mission mis-c cancelled"},
		{protocol.ChildFailureBlock, "out of budget", "child Mission mis-c cancelled: out of budget"},
	} {
		k := newKit(t)
		k.to("wi", protocol.WorkQueued)
		k.must(k.createChildIn("wi", "mis-c", tc.policy))
		out, err := k.childOutcome(ChildOutcome{ParentWorkItemID: "wi", ChildMissionID: "mis-c", State: protocol.MissionCancelled, Reason: tc.reason, CausationID: "evt-c"})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if tc.policy == protocol.ChildFailureFail {
			for _, ev := range out.Events {
				if f, ok := ev.Payload.(*Failed); ok {
					got = f.Reason
				}
			}
		} else if b := k.g.Items["wi"].Blocker; b != nil {
			got = b.Detail
		}
		if got != tc.want {
			t.Errorf("%s, reason %q: %q, want %q", tc.policy, tc.reason, got, tc.want)
		}
	}
}
