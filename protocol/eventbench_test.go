package protocol

import (
	"encoding/json"
	"testing"
)

// benchOfferAcceptedPayload is a work.offer.accepted payload as the
// authority emits it, for the event benchmarks.
const benchOfferAcceptedPayload = `{"workItemId":"wi-7","state":"queued","offerId":"off-1","contractRevision":1,` +
	`"ownership":{"workItemId":"wi-7","ownerAgentId":"worker-1","ownershipEpoch":4,"startDeadline":"2026-11-30T08:15:00Z"},` +
	`"scheduleDisclosure":{"estimatedStartWindow":{"from":"2026-11-30T08:05:00Z","to":"2026-11-30T08:20:00.250Z"},` +
	`"estimatedCompletion":"2026-11-30T09:30:00Z","confidence":0.8,"capacityState":"available","computedAt":"2026-11-30T08:00:00Z"}}`

// benchEvent is a typical Group event: that payload in its envelope.
const benchEvent = `{"eventId":"evt-42","groupId":"grp-a","sequence":42,"aggregate":{"kind":"workItem","id":"wi-7"},"revision":5,` +
	`"type":"work.offer.accepted","actor":{"kind":"agent","id":"worker-1"},"causationId":"act-01J","correlationId":"mis-a",` +
	`"occurredAt":"2026-11-30T08:00:00.120Z","acceptedBy":"authority-1","payload":` + benchOfferAcceptedPayload + `,` +
	`"signature":{"alg":"Ed25519","keyId":"authority:authority-1#k1","createdAt":"2026-11-30T08:00:00.120Z",` +
	`"value":"5Wgz613ocJdrRO3n58sq77Rk1s6tXAgsbIywZY6SJp8HMmuKmXJKf-cmrIwrI6DB9ITUI4GAVjG8DCS6j5wCIQ"}}`

// BenchmarkValidateEvent is strict decoding plus event.schema.json of a
// typical event: what the event schema costs beside the signature check.
func BenchmarkValidateEvent(b *testing.B) {
	raw := []byte(benchEvent)
	b.ReportAllocs()
	for b.Loop() {
		doc, err := Parse(raw, DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := Validate("event", doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInboundEventFrameTypical is the worker's receipt of that event
// in an EVENT frame, signed: strict parse, typed decode, canonical bytes,
// Ed25519 verification and (since event schemas) the schema.
func BenchmarkInboundEventFrameTypical(b *testing.B) {
	k := testKey(b, "authority:authority-1#k1", 3)
	keys := NewKeySet(k.Public())
	var ev Event
	if err := json.Unmarshal([]byte(benchEvent), &ev); err != nil {
		b.Fatal(err)
	}
	signed, err := SignedEvent(&ev, k)
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(`{"type":"EVENT","frameId":"f-1","event":` + string(signed) + `}`)
	b.ReportAllocs()
	for b.Loop() {
		parsed, err := Parse(raw, DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := InboundEventFrame(parsed, keys); err != nil {
			b.Fatal(err)
		}
	}
}
