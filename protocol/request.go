package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"time"
)

// RequestProof authenticates one HTTPS request to the authority's routes
// (docs/wire.md "HTTPS routes"): a Signed Document naming the request's
// method and target, fresh within the clock skew, with a nonce never used
// before. It is what a HELLO proof is to a connection, for principals that
// do not HELLO (humans) and for requests outside a connection.
type RequestProof struct {
	Actor Actor `json:"actor"`
	// Method and Target are the request's method and its path with the
	// query exactly as sent (net/http's RequestURI).
	Method    string    `json:"method"`
	Target    string    `json:"target"`
	Nonce     string    `json:"nonce"`
	IssuedAt  Time      `json:"issuedAt"`
	Signature Signature `json:"signature"`
}

// RequestProofHeader carries a RequestProof: base64url without padding of
// its JCS bytes.
const RequestProofHeader = "MWP-Proof"

// MaxRequestProofBytes bounds the header value (before decoding).
const MaxRequestProofBytes = 8 << 10

var nonceForm = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// SignRequest returns the RequestProofHeader value for one request.
func SignRequest(actor Actor, k PrivateKey, method, target, nonce string, now time.Time) (string, error) {
	at := NewTime(now)
	p := RequestProof{Actor: actor, Method: method, Target: target, Nonce: nonce, IssuedAt: at,
		Signature: Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: at}}
	raw, err := SignedValue(p, k)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// DecodeRequestProof parses a RequestProofHeader value strictly: base64url,
// I-JSON, exactly RequestProof's members, each in its form. It returns the
// proof and the parsed document (for Verify). It does not verify the
// signature. Every refusal is PROTOCOL_VIOLATION.
func DecodeRequestProof(header string) (*RequestProof, map[string]any, error) {
	bad := func(format string, args ...any) (*RequestProof, map[string]any, error) {
		return nil, nil, Errorf(CodeProtocolViolation, "%s: "+format, append([]any{RequestProofHeader}, args...)...)
	}
	if len(header) > MaxRequestProofBytes {
		return bad("longer than %d bytes", MaxRequestProofBytes)
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return bad("not base64url without padding")
	}
	parsed, err := Parse(raw, DecodeOptions{MaxBytes: MaxRequestProofBytes, MaxDepth: 4})
	if err != nil {
		return bad("%v", err)
	}
	doc, ok := parsed.(map[string]any)
	if !ok {
		return bad("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p RequestProof
	if err := dec.Decode(&p); err != nil {
		return bad("%v", err)
	}
	for _, m := range []string{"actor", "method", "target", "nonce", "issuedAt", "signature"} {
		if _, ok := doc[m]; !ok {
			return bad("%s is required", m)
		}
	}
	switch {
	case !p.Actor.Kind.Known() || !ValidID(p.Actor.ID):
		return bad("actor is not {kind, id}")
	case p.Method == "" || len(p.Method) > 16, p.Target == "" || p.Target[0] != '/':
		return bad("method and target name the request")
	case !nonceForm.MatchString(p.Nonce):
		return bad("nonce is not 16-128 base64url characters")
	case !ValidKeyID(p.Signature.KeyID) || p.Signature.Alg != SignatureAlgEd25519:
		return bad("signature is not an Ed25519 signature with a key id")
	}
	return &p, doc, nil
}

// EncodeDocumentHeader is the header form of any signed document (the
// RequestProof, a CapabilityToken): base64url without padding of its JCS
// bytes.
func EncodeDocumentHeader(v any) (string, error) {
	raw, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// CapabilityHeader carries a CapabilityToken (EncodeDocumentHeader form)
// on the artifact routes.
const CapabilityHeader = "MWP-Capability"

// DecodeCapabilityHeader parses a CapabilityHeader value strictly; it does
// not verify the token (CheckCapabilityToken). Refusals are
// PROTOCOL_VIOLATION.
func DecodeCapabilityHeader(header string) (*CapabilityToken, error) {
	bad := func(format string, args ...any) (*CapabilityToken, error) {
		return nil, Errorf(CodeProtocolViolation, "%s: "+format, append([]any{CapabilityHeader}, args...)...)
	}
	if len(header) > MaxRequestProofBytes {
		return bad("longer than %d bytes", MaxRequestProofBytes)
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return bad("not base64url without padding")
	}
	if _, err := Parse(raw, DecodeOptions{MaxBytes: MaxRequestProofBytes, MaxDepth: 4}); err != nil {
		return bad("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var t CapabilityToken
	if err := dec.Decode(&t); err != nil {
		return bad("%v", err)
	}
	if t.TokenID == "" || t.LeaseID == "" || t.AgentID == "" || t.GroupID == "" || !ValidKeyID(t.Signature.KeyID) {
		return bad("not a capability token")
	}
	return &t, nil
}

// ValidID reports whether s matches the wire id pattern
// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ (docs/wire.md "Scalars").
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// The answers of the HTTPS routes (docs/wire.md "HTTPS routes").

// SessionInfo is GET /mwp/session's answer: who the request proof
// authenticated, and an agent's session.
type SessionInfo struct {
	Actor        Actor  `json:"actor"`
	SessionEpoch uint64 `json:"sessionEpoch"`
	// AgentCardHash is an agent's registered card's digest, which its
	// session_open names.
	AgentCardHash string `json:"agentCardHash,omitempty"`
	ServerTime    Time   `json:"serverTime"`
}

// MissionRef is GET /mwp/missions/{id}'s answer.
type MissionRef struct {
	MissionID string `json:"missionId"`
	GroupID   string `json:"groupId"`
}

// ArtifactRef is PUT /mwp/artifacts/{digest}'s answer.
type ArtifactRef struct {
	Digest string `json:"digest"`
	Size   uint64 `json:"size"`
	URI    string `json:"uri"`
}

// ArtifactURI is the URI a manifest names for bytes in the authority's
// store.
func ArtifactURI(digest string) string { return "mwp-artifact:" + digest }
