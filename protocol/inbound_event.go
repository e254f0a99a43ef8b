package protocol

import (
	"reflect"
	"slices"
)

var (
	eventType      = reflect.TypeFor[Event]()
	eventFrameType = reflect.TypeFor[EventFrame]()
)

// InboundEventFrame is DecodeFrameParsed for an EVENT frame followed by
// InboundEvent on its event: the same strictness and errors, the signature
// checked when keys is non-nil, and the event's JCS bytes; then, unlike
// InboundEvent, event.schema.json — the envelope, the payload of the
// event's type and its aggregate kind — as ValidateEventAt reports it,
// below /event (SCHEMA_VALIDATION_FAILED). It is the
// worker's hot path (one call per received event), so the event is
// canonicalized once and decoded from the parsed value, never from bytes.
func InboundEventFrame(parsed any, keys KeyResolver) (*EventFrame, []byte, error) {
	if t, err := DecodeFrameType(parsed); err != nil {
		return nil, nil, err
	} else if t != FrameEvent {
		return nil, nil, Errorf(CodeProtocolViolation, "frame type %q is not EVENT", t).At("/type")
	}
	if err := checkValue(parsed, eventFrameType); err != nil {
		return nil, nil, err
	}
	top := parsed.(map[string]any)
	f := &EventFrame{Type: FrameEvent, FrameID: str(top, "frameId")}
	doc, _ := top["event"].(map[string]any)
	if doc != nil {
		f.Event = &Event{} // only for checkFrame; replaced below
	}
	if err := checkFrame(f); err != nil {
		return nil, nil, err
	}
	ev, canon, err := decodeEvent(doc, keys, true)
	if err != nil {
		return nil, nil, err
	}
	f.Event = ev
	return f, canon, nil
}

// InboundEvent checks and decodes one parsed event document (a value from
// Parse): exact typed decoding (PROTOCOL_VIOLATION with a pointer for an
// unknown member, a null, a wrong kind or a time not in the wire form), then
// the signature when keys is non-nil (AUTH_INVALID_SIGNATURE, as Verify).
// It returns the Event and its JCS bytes; Event.Payload holds the payload's
// JCS bytes (a sub-slice of them when the signature has the usual members).
// It does not apply event.schema.json: events received on the wire get it
// from InboundEventFrame, and ValidateEventAt checks any other.
func InboundEvent(doc map[string]any, keys KeyResolver) (*Event, []byte, error) {
	if doc == nil {
		return nil, nil, Errorf(CodeProtocolViolation, "the event is not a JSON object")
	}
	if err := checkValue(doc, eventType); err != nil {
		return nil, nil, err
	}
	return decodeEvent(doc, keys, false)
}

// decodeEvent is InboundEvent after the typed checks; with schema set it
// also applies event.schema.json, after the signature (a forged event is
// an authentication failure whatever its shape), with pointers below
// /event.
func decodeEvent(doc map[string]any, keys KeyResolver, schema bool) (*Event, []byte, error) {
	var check *sigCheck
	if keys != nil {
		c, err := checkSignature(doc, keys)
		if err != nil {
			return nil, nil, err
		}
		check = c
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	input, canon, payload, err := canonicalEvent((*bp)[:0], doc)
	if err != nil {
		if check != nil {
			// As Verify reports a document with no canonical form.
			return nil, nil, Errorf(CodeAuthInvalidSignature, "no canonical form: %v", err)
		}
		return nil, nil, err
	}
	*bp = input
	if check != nil {
		if input == nil {
			// canonicalEvent found a signature it could not split; form
			// checks above make this unreachable, but never skip a check.
			if input, err = SigningInput(doc); err != nil {
				return nil, nil, err
			}
		}
		if err := check.verify(input); err != nil {
			return nil, nil, err
		}
	}
	if schema {
		if err := ValidateEventAt(doc, "/event"); err != nil {
			return nil, nil, err
		}
	}
	ev, err := eventFromParsed(doc)
	if err != nil {
		return nil, nil, err
	}
	ev.Payload = payload
	return ev, canon, nil
}

// canonicalEvent writes doc's JCS bytes in one pass. When the signature is
// an object whose members are among alg, createdAt, keyId and value, with
// value a string and at least one other member, it also returns the
// signing input (the same bytes without signature.value, written into dst):
// "value" sorts last among those names, so the full form is the input with
// `,"value":…` put back before the signature's closing brace. payload is
// the payload member's JCS bytes (nil when absent).
func canonicalEvent(dst []byte, doc map[string]any) (input, canon, payload []byte, err error) {
	sig, _ := doc["signature"].(map[string]any)
	value, splittable := sig["value"].(string)
	for name := range sig {
		switch name {
		case "alg", "createdAt", "keyId", "value":
		default:
			splittable = false
		}
	}
	if len(sig) < 2 {
		splittable = false
	}
	if !splittable {
		if canon, err = Canonical(doc); err != nil {
			return nil, nil, nil, err
		}
		if p, ok := doc["payload"]; ok {
			// The payload's bytes are the same value written alone.
			b, err := Canonical(p)
			if err != nil {
				return nil, nil, nil, err
			}
			return nil, canon, b, nil
		}
		return nil, canon, nil, nil
	}
	var span [2]int
	names := make([]string, 0, len(doc))
	for k := range doc {
		names = append(names, k)
	}
	slices.SortFunc(names, compareUTF16)
	buf := append(dst, '{')
	cut := -1
	for i, k := range names {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCanonicalString(buf, k)
		buf = append(buf, ':')
		switch k {
		case "signature":
			unsigned := make(map[string]any, len(sig)-1)
			for n, v := range sig {
				if n != "value" {
					unsigned[n] = v
				}
			}
			if buf, err = AppendCanonical(buf, unsigned); err != nil {
				return nil, nil, nil, err
			}
			cut = len(buf) - 1
		case "payload":
			start := len(buf)
			if buf, err = AppendCanonical(buf, doc[k]); err != nil {
				return nil, nil, nil, err
			}
			span = [2]int{start, len(buf)}
		default:
			if buf, err = AppendCanonical(buf, doc[k]); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	buf = append(buf, '}')
	insert := appendCanonicalString([]byte(`,"value":`), value)
	canon = make([]byte, 0, len(buf)+len(insert))
	canon = append(canon, buf[:cut]...)
	canon = append(canon, insert...)
	canon = append(canon, buf[cut:]...)
	if span[1] > 0 {
		if span[0] > cut {
			span[0] += len(insert)
			span[1] += len(insert)
		}
		payload = canon[span[0]:span[1]:span[1]]
	}
	return buf, canon, payload, nil
}

// eventFromParsed builds the typed Event from a document that passed
// checkValue against Event, so every member has the right kind.
func eventFromParsed(doc map[string]any) (*Event, error) {
	// The Event and its two optional numbers in one allocation.
	alloc := &struct {
		ev   Event
		nums [2]uint64
	}{}
	ev := &alloc.ev
	*ev = Event{
		EventID:       str(doc, "eventId"),
		GroupID:       str(doc, "groupId"),
		Type:          EventType(str(doc, "type")),
		CausationID:   str(doc, "causationId"),
		CorrelationID: str(doc, "correlationId"),
		AcceptedBy:    str(doc, "acceptedBy"),
	}
	var err error
	if ev.Sequence, err = optUint(doc, "sequence", &alloc.nums[0]); err != nil {
		return nil, err
	}
	if ev.Revision, err = optUint(doc, "revision", &alloc.nums[1]); err != nil {
		return nil, err
	}
	if agg, ok := doc["aggregate"].(map[string]any); ok {
		ev.Aggregate = &Aggregate{Kind: AggregateKind(str(agg, "kind")), ID: str(agg, "id")}
	}
	if actor, ok := doc["actor"].(map[string]any); ok {
		ev.Actor = Actor{Kind: ActorKind(str(actor, "kind")), ID: str(actor, "id")}
	}
	if s, ok := doc["occurredAt"].(string); ok {
		if ev.OccurredAt, err = ParseTime(s); err != nil {
			return nil, Errorf(CodeProtocolViolation, "occurredAt: %v", err).At("/occurredAt")
		}
	}
	if sig, ok := doc["signature"].(map[string]any); ok {
		ev.Signature = Signature{Alg: str(sig, "alg"), KeyID: str(sig, "keyId"), Value: str(sig, "value")}
		if s, ok := sig["createdAt"].(string); ok {
			if ev.Signature.CreatedAt, err = ParseTime(s); err != nil {
				return nil, Errorf(CodeProtocolViolation, "signature.createdAt: %v", err).At("/signature/createdAt")
			}
		}
	}
	return ev, nil
}
