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
