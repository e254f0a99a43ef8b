package protocol

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SignedEvent signs ev with k (createdAt = occurredAt) and returns its JCS
// bytes; ev.Signature is set to the result. The bytes are written once
// from ev (signevent.go), with no JSON round trip.
func SignedEvent(ev *Event, k PrivateKey) ([]byte, error) {
	return signEvent(ev, k)
}

// unsignedValue stands in for the signature value while an event is
// validated before signing: the one member signing computes, in its form.
var unsignedValue = strings.Repeat("A", 86)

// SignedEventChecked is SignedEvent for a producer that must never sign an
// event its schema refuses (the authority): ev is first validated against
// event.schema.json — the envelope, its type's payload schema and its
// aggregate kind — with its signature complete but for the value signing
// computes. A refusal is ValidateEventAt's error and nothing is signed.
func SignedEventChecked(ev *Event, k PrivateKey) ([]byte, error) {
	buf, lay, err := unsignedEvent(ev, k)
	if err != nil {
		return nil, err
	}
	doc, ok := eventDocument(ev, buf, lay)
	if !ok {
		probe := make([]byte, 0, len(buf)+valueMember)
		probe = append(append(append(probe, buf[:lay.cut]...), `,"value":"`+unsignedValue+`"`...), buf[lay.cut:]...)
		parsed, err := Parse(probe, DecodeOptions{})
		if doc, ok = parsed.(map[string]any); err != nil || !ok {
			return nil, Errorf(CodeInternalError, "event %s does not parse back: %v", ev.EventID, err)
		}
	}
	if err := ValidateEventAt(doc, ""); err != nil {
		return nil, err
	}
	return spliceSignature(ev, k, buf, lay.cut), nil
}

// eventDocument is what Parse gives for the signing input buf of ev with
// unsignedValue spliced in as the signature's value, built from ev's
// members; only the payload and extensions are parsed, from their spans of
// buf. Strings are the same as read back when they are valid UTF-8 (else
// the signed bytes carry U+FFFD); false when one is not, when the document
// would be over DefaultMaxBytes, or when a span does not parse: then the
// caller parses the whole document, for the same result or error.
func eventDocument(ev *Event, buf []byte, lay eventLayout) (map[string]any, bool) {
	if len(buf)+valueMember > DefaultMaxBytes {
		return nil, false
	}
	at := ev.OccurredAt.String()
	for _, s := range [...]string{ev.AcceptedBy, ev.Actor.ID, string(ev.Actor.Kind), ev.CausationID, ev.CorrelationID,
		ev.EventID, ev.GroupID, string(ev.Type), ev.Signature.Alg, ev.Signature.KeyID} {
		if !utf8.ValidString(s) {
			return nil, false
		}
	}
	doc := make(map[string]any, 16)
	doc["acceptedBy"] = ev.AcceptedBy
	doc["actor"] = map[string]any{"id": ev.Actor.ID, "kind": string(ev.Actor.Kind)}
	if a := ev.Aggregate; a != nil {
		if !utf8.ValidString(a.ID) || !utf8.ValidString(string(a.Kind)) {
			return nil, false
		}
		doc["aggregate"] = map[string]any{"id": a.ID, "kind": string(a.Kind)}
	}
	doc["causationId"] = ev.CausationID
	doc["correlationId"] = ev.CorrelationID
	doc["eventId"] = ev.EventID
	for _, m := range [...]struct {
		name string
		at   span
	}{{"extensions", lay.extensions}, {"payload", lay.payload}} {
		if m.at.end == 0 {
			continue
		}
		// One level below the event object, as in the whole document.
		v, err := Parse(buf[m.at.start:m.at.end], DecodeOptions{MaxDepth: DefaultMaxDepth - 1})
		if err != nil {
			return nil, false
		}
		doc[m.name] = v
	}
	if ev.GroupID != "" {
		doc["groupId"] = ev.GroupID
	}
	doc["occurredAt"] = at
	if ev.Revision != nil {
		doc["revision"] = json.Number(strconv.FormatUint(*ev.Revision, 10))
	}
	if ev.Sequence != nil {
		doc["sequence"] = json.Number(strconv.FormatUint(*ev.Sequence, 10))
	}
	doc["signature"] = map[string]any{"alg": ev.Signature.Alg, "createdAt": at, "keyId": ev.Signature.KeyID, "value": unsignedValue}
	doc["type"] = string(ev.Type)
	return doc, true
}

// SignedValue signs any Go value that marshals to a document with one of
// issuedAt, occurredAt or createdAt and a signature member, returning the
// JCS bytes of the signed document.
func SignedValue(v any, k PrivateKey) ([]byte, error) {
	doc, err := toDoc(v)
	if err != nil {
		return nil, err
	}
	if err := SignDocument(doc, k); err != nil {
		return nil, err
	}
	return Canonical(doc)
}

// SignedCard returns card signed by k (createdAt = issuedAt), as
// agent_card_register carries it: the authority, the worker registering
// itself and `run --enrollment` all sign cards the same way.
func SignedCard(card AgentCard, k PrivateKey) (AgentCard, error) {
	card.Signature = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: card.IssuedAt}
	raw, err := SignedValue(card, k)
	if err != nil {
		return card, err
	}
	var out AgentCard
	err = json.Unmarshal(raw, &out)
	return out, err
}

// signByDocument signs v, whose signature is *sig, by way of a parsed
// document: createdAt is at (the value of v's member), and *sig is set to
// the signature the signed bytes carry.
func signByDocument(v any, sig *Signature, k PrivateKey, member string, at Time) ([]byte, error) {
	*sig = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: at}
	raw, err := signTyped(v, k, member)
	if err != nil {
		return nil, err
	}
	return raw, setSignature(raw, sig)
}

func signTyped(v any, k PrivateKey, member string) ([]byte, error) {
	doc, err := toDoc(v)
	if err != nil {
		return nil, err
	}
	if err := signWithMember(doc, k, member); err != nil {
		return nil, err
	}
	return Canonical(doc)
}

func toDoc(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	parsed, err := Parse(raw, DecodeOptions{MaxBytes: math.MaxInt})
	if err != nil {
		return nil, err
	}
	doc, ok := parsed.(map[string]any)
	if !ok {
		return nil, Errorf(CodeSchemaValidationFailed, "a signed document must be a JSON object")
	}
	return doc, nil
}

func setSignature(raw []byte, sig *Signature) error {
	var s struct {
		Signature Signature `json:"signature"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	*sig = s.Signature
	return nil
}
