package protocol

import (
	"encoding/json"
	"time"
)

// EnrollmentExtensionURI is our critical extension on an agent's enrollment
// document (its first agent_card_register, written out of band by
// `mwp-worker run --enrollment`): it lets the document be accepted until
// validUntil instead of within the clock skew of its issuedAt. The spec has
// no enrollment document; docs/wire.md describes this one as ours.
const EnrollmentExtensionURI = "urn:mwp-worker:extension:enrollment-validity"

// DefaultEnrollmentValidity and MaxEnrollmentValidity bound how long an
// enrollment document stays acceptable after its issuedAt.
const (
	DefaultEnrollmentValidity = time.Hour
	MaxEnrollmentValidity     = 24 * time.Hour
)

// EnrollmentValidity is the data of the enrollment extension.
type EnrollmentValidity struct {
	ValidUntil Time `json:"validUntil"`
}

// EnrollmentExtension is the extension entry of an enrollment document
// issued at issuedAt and valid for valid (1 ms … MaxEnrollmentValidity).
func EnrollmentExtension(issuedAt time.Time, valid time.Duration) (Extensions, error) {
	if valid <= 0 || valid > MaxEnrollmentValidity {
		return nil, Errorf(CodeInvalidCommand, "enrollment validity %s is outside 1ms … %s", valid, MaxEnrollmentValidity)
	}
	data, err := json.Marshal(EnrollmentValidity{ValidUntil: NewTime(issuedAt.Add(valid))})
	if err != nil {
		return nil, err
	}
	return Extensions{EnrollmentExtensionURI: {Critical: true, Data: data}}, nil
}

// Enrollment is an agent's enrollment document: its card, with the key
// and issuedAt filled in and signed by key, in a signed
// agent_card_register that the authority accepts from now until valid
// later (docs/wire.md, "Agent bootstrap").
func Enrollment(card AgentCard, key PrivateKey, now time.Time, valid time.Duration) ([]byte, error) {
	ext, err := EnrollmentExtension(now, valid)
	if err != nil {
		return nil, err
	}
	card.Keys = List[PublicKey]{key.Public().Encode()}
	card.IssuedAt = NewTime(now)
	signed, err := SignedCard(card, key)
	if err != nil {
		return nil, err
	}
	_, raw, err := BuildCommand(Actor{Kind: ActorAgent, ID: card.AgentID}, key, CmdAgentCardRegister, Envelope{Extensions: ext},
		&RegisterAgentCardPayload{AgentCard: signed}, now)
	return raw, err
}

// verifyFreshCommand is VerifyFresh for a Command, except that an
// agent_card_register carrying the enrollment extension is fresh from
// issuedAt (minus the skew) until its validUntil, at most
// MaxEnrollmentValidity later. Past validUntil it is AUTH_INVALID_SIGNATURE
// with details.reason "enrollment_expired", like any stale document.
//
// It writes the signing input to dst and its layout to lay (see
// verifyInto) and returns the input and the signature's value.
func verifyFreshCommand(doc map[string]any, keys KeyResolver, now time.Time, maxSkew time.Duration, dst []byte, lay *signedLayout, text *signedText) ([]byte, string, error) {
	input, value, err := verifyInto(dst, doc, keys, lay, text)
	if err != nil {
		return nil, "", err
	}
	return input, value, checkCommandFresh(doc, now, maxSkew)
}

func checkCommandFresh(doc map[string]any, now time.Time, maxSkew time.Duration) error {
	exts, _ := doc["extensions"].(map[string]any)
	entry, ok := exts[EnrollmentExtensionURI].(map[string]any)
	if !ok || doc["type"] != string(CmdAgentCardRegister) {
		return checkIssuedAt(doc, now, maxSkew)
	}
	ptr := pointerOf([]string{"extensions", EnrollmentExtensionURI, "data", "validUntil"})
	issued, err := ParseTime(str(doc, "issuedAt"))
	if err != nil {
		return Errorf(CodeAuthInvalidSignature, "issuedAt is not a wire time").At("/issuedAt")
	}
	data, _ := entry["data"].(map[string]any)
	until, err := ParseTime(str(data, "validUntil"))
	if err != nil {
		return Errorf(CodeInvalidCommand, "the enrollment extension needs validUntil, a wire time").At(ptr)
	}
	if v := until.Sub(issued.Time); v <= 0 || v > MaxEnrollmentValidity {
		return WithDetails(Errorf(CodeInvalidCommand, "enrollment valid for %s after its issuedAt; at most %s", v, MaxEnrollmentValidity).At(ptr),
			"maxValidityMs", MaxEnrollmentValidity.Milliseconds())
	}
	if ahead := issued.Sub(now); ahead > maxSkew {
		return Errorf(CodeAuthInvalidSignature, "issuedAt %s is in the future: %s after now %s, allowed skew %s", issued, ahead, NewTime(now), maxSkew).At("/issuedAt")
	}
	if now.After(until.Time) {
		return WithDetails(Errorf(CodeAuthInvalidSignature, "the enrollment expired at %s (now %s); write a new one with mwp-worker run --enrollment", until, NewTime(now)).At(ptr),
			"reason", "enrollment_expired", "validUntil", until.String())
	}
	return nil
}
