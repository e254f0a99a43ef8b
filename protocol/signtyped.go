package protocol

import (
	"encoding/json"
	"math"
	"strings"
)

// SignedCommand signs cmd with k and returns its JCS bytes, ready to send.
// It fills signature alg, keyId and createdAt (= issuedAt) and sets
// cmd.Signature to the result, so a retry can resend the same bytes.
func SignedCommand(cmd *Command, k PrivateKey) ([]byte, error) {
	cmd.Signature = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: cmd.IssuedAt}
	raw, err := signTyped(cmd, k, "issuedAt")
	if err != nil {
		return nil, err
	}
	return raw, setSignature(raw, &cmd.Signature)
}

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
	buf, cut, err := unsignedEvent(ev, k)
	if err != nil {
		return nil, err
	}
	probe := make([]byte, 0, len(buf)+valueMember)
	probe = append(append(append(probe, buf[:cut]...), `,"value":"`+unsignedValue+`"`...), buf[cut:]...)
	parsed, err := Parse(probe, DecodeOptions{})
	doc, ok := parsed.(map[string]any)
	if err != nil || !ok {
		return nil, Errorf(CodeInternalError, "event %s does not parse back: %v", ev.EventID, err)
	}
	if err := ValidateEventAt(doc, ""); err != nil {
		return nil, err
	}
	return spliceSignature(ev, k, buf, cut), nil
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
