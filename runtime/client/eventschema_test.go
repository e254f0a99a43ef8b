package client

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// The worker checks every event it receives against event.schema.json
// after the signature: an authority-signed event whose payload does not
// fit its type, or whose aggregate kind is not its type's, is refused on
// receipt (SCHEMA_VALIDATION_FAILED, pointer below /event) and never
// reaches the store.
func TestReceiptChecksEventSchema(t *testing.T) {
	frame := func(mutate func(ev *protocol.Event)) []byte {
		t.Helper()
		var ev protocol.Event
		if err := json.Unmarshal(signedEvent(t, "grp-a", 3, authorityKey), &ev); err != nil {
			t.Fatal(err)
		}
		mutate(&ev)
		raw, err := protocol.SignedEvent(&ev, authorityKey) // signed by the authority: only the schema can refuse it
		if err != nil {
			t.Fatal(err)
		}
		return []byte(`{"type":"EVENT","frameId":"f-1","event":` + string(raw) + `}`)
	}
	tests := []struct {
		name        string
		mutate      func(ev *protocol.Event)
		wantPointer string // "" accepted
	}{
		{"valid", func(*protocol.Event) {}, ""},
		{"payload not its type", func(ev *protocol.Event) { ev.Payload = json.RawMessage(`{"anything":"goes"}`) }, "/event/payload"},
		{"aggregate kind not its type", func(ev *protocol.Event) { ev.Aggregate.Kind = protocol.AggregateMission }, "/event/aggregate/kind"},
		{"unknown core type", func(ev *protocol.Event) { ev.Type = "work.exploded" }, "/event/type"},
		{"unknown ext type, free payload", func(ev *protocol.Event) {
			ev.Type, ev.Payload = "ext.acme.review.requested", json.RawMessage(`{"anything":"goes"}`)
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := decodeInbound(frame(tc.mutate), protocol.DecodeOptions{}, authorityKeys())
			if tc.wantPointer == "" {
				if err != nil || in.typ != protocol.FrameEvent || in.event.Event == nil {
					t.Fatalf("want the event accepted, got %+v, %v", in, err)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeSchemaValidationFailed || pe.Pointer != tc.wantPointer {
				t.Fatalf("want SCHEMA_VALIDATION_FAILED at %s, got %v", tc.wantPointer, err)
			}
		})
	}
}
