package protocol

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"
)

// Signatures (docs/wire.md "Signature"): every Command, Event and Signed Document
// carries
//
//	"signature": {"alg": "Ed25519", "keyId": "...", "createdAt": "<time>", "value": "<base64url>"}
//
// over the RFC 8785 bytes of the whole object with only signature.value
// removed, so alg, keyId and createdAt are protected too. The functions here
// work on the generic value returned by Parse, so an inbound document is
// parsed once and the same tree serves signature, schema and typed decode.
//
// signature.createdAt equals the document's own time: issuedAt (Commands,
// HELLO proofs, Agent Cards), else occurredAt (Events), else createdAt
// (artifact manifests, snapshots). Verify checks that equality whenever one
// of those members is present.

// DefaultMaxSkew is the clock skew allowed between a signer's issuedAt and
// the verifier's clock, in either direction.
const DefaultMaxSkew = 2 * time.Minute

// KeyResolver finds the public key a keyId names; false for an unknown id.
type KeyResolver interface {
	PublicKey(keyID string) (ed25519.PublicKey, bool)
}

// KeySet is a fixed set of keys by keyId.
type KeySet map[string]ed25519.PublicKey

// NewKeySet returns a KeySet holding keys.
func NewKeySet(keys ...VerifyingKey) KeySet {
	s := make(KeySet, len(keys))
	for _, k := range keys {
		s[k.KeyID] = k.Key
	}
	return s
}

// PublicKey implements KeyResolver.
func (s KeySet) PublicKey(keyID string) (ed25519.PublicKey, bool) {
	k, ok := s[keyID]
	return k, ok
}

// timeMembers are the members whose value signature.createdAt must equal,
// in order of precedence.
var timeMembers = [...]string{"issuedAt", "occurredAt", "createdAt"}

// SigningInput returns the JCS bytes of doc without signature.value. It
// copies only the top-level map and the signature map.
func SigningInput(doc map[string]any) ([]byte, error) {
	sig, err := signatureObject(doc)
	if err != nil {
		return nil, err
	}
	return appendSigningInput(nil, doc, sig)
}

func signatureObject(doc map[string]any) (map[string]any, error) {
	v, ok := doc["signature"]
	if !ok {
		return nil, Errorf(CodeAuthInvalidSignature, "the document has no signature").At("/signature")
	}
	sig, ok := v.(map[string]any)
	if !ok {
		return nil, Errorf(CodeAuthInvalidSignature, "signature must be an object").At("/signature")
	}
	return sig, nil
}

// appendSigningInput appends the signing input of doc with sig standing in
// for its signature member.
func appendSigningInput(dst []byte, doc, sig map[string]any) ([]byte, error) {
	return appendSigningLayout(dst, doc, sig, nil)
}

// appendSigningLayout is appendSigningInput that also records lay.
func appendSigningLayout(dst []byte, doc, sig map[string]any, lay *signedLayout) ([]byte, error) {
	out, err := appendSigned(dst, doc, sig, lay)
	if err != nil {
		return nil, Errorf(CodeAuthInvalidSignature, "no canonical form: %v", err)
	}
	return out, nil
}

// Sign sets doc's signature by k with the given createdAt (docs/wire.md time
// form). When doc has issuedAt, occurredAt or createdAt, createdAt must be
// the same instant, else the result would not verify. doc is changed only
// on success.
func Sign(doc map[string]any, k PrivateKey, createdAt time.Time) error {
	if y := createdAt.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("protocol: createdAt year %d has no RFC 3339 form", y)
	}
	return signAt(doc, k, NewTime(createdAt).String())
}

// SignCommand signs a Command; createdAt is its issuedAt (docs/wire.md).
func SignCommand(doc map[string]any, k PrivateKey) error {
	return signWithMember(doc, k, "issuedAt")
}

// SignEvent signs an Event; createdAt is its occurredAt.
func SignEvent(doc map[string]any, k PrivateKey) error {
	return signWithMember(doc, k, "occurredAt")
}

// SignDocument signs any Command, Event or Signed Document, taking
// createdAt from the first of issuedAt, occurredAt and createdAt present.
// A document with none of them needs Sign and an explicit time.
func SignDocument(doc map[string]any, k PrivateKey) error {
	for _, name := range timeMembers {
		if _, ok := doc[name]; ok {
			return signWithMember(doc, k, name)
		}
	}
	return Errorf(CodeSchemaValidationFailed, "the document has none of issuedAt, occurredAt, createdAt to take signature.createdAt from; give the time explicitly")
}

func signWithMember(doc map[string]any, k PrivateKey, name string) error {
	v, ok := doc[name]
	if !ok {
		return Errorf(CodeSchemaValidationFailed, "%s is required to sign", name).At("/" + name)
	}
	s, ok := v.(string)
	if !ok {
		return Errorf(CodeSchemaValidationFailed, "%s must be a time string", name).At("/" + name)
	}
	// The string is copied as it is, so createdAt and the member compare
	// equal as text as well as instants.
	return signAt(doc, k, s)
}

func signAt(doc map[string]any, k PrivateKey, createdAt string) error {
	if doc == nil {
		return fmt.Errorf("protocol: cannot sign a nil document")
	}
	if err := k.check(); err != nil {
		return err
	}
	at, err := ParseTime(createdAt)
	if err != nil {
		return Errorf(CodeSchemaValidationFailed, "createdAt %q is not RFC 3339 UTC (YYYY-MM-DDTHH:MM:SS[.fff]Z)", createdAt).At("/signature/createdAt")
	}
	if err := checkCreatedAt(doc, at); err != nil {
		return err
	}
	sig := map[string]any{"alg": SignatureAlgEd25519, "keyId": k.KeyID, "createdAt": createdAt}
	input, err := appendSigningInput(make([]byte, 0, 1024), doc, sig)
	if err != nil {
		return err
	}
	sig["value"] = b64.EncodeToString(ed25519.Sign(k.Key, input))
	doc["signature"] = sig
	return nil
}

// checkCreatedAt holds createdAt to the document's own time, if it has one.
func checkCreatedAt(doc map[string]any, createdAt Time) *Error {
	for _, name := range timeMembers {
		v, ok := doc[name]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Errorf(CodeAuthInvalidSignature, "%s must be a time string", name).At("/" + name)
		}
		t, err := ParseTime(s)
		if err != nil {
			return Errorf(CodeAuthInvalidSignature, "%s %q is not a wire time", name, s).At("/" + name)
		}
		if !t.Equal(createdAt.Time) {
			return Errorf(CodeAuthInvalidSignature, "signature.createdAt %s differs from %s %s", createdAt, name, s).At("/signature/createdAt")
		}
		return nil
	}
	return nil
}

// bufPool holds signing-input buffers for Verify, which does not keep them.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Verify checks doc's signature against the key its keyId names. Every
// failure is a *Error with code AUTH_INVALID_SIGNATURE and a pointer to the
// offending member: a missing or malformed signature object, an alg other
// than Ed25519, an unknown keyId, a value that is not 86 characters of
// unpadded base64url, a createdAt that differs from the document's
// issuedAt/occurredAt/createdAt, or a value that does not match (wrong key,
// any tampered member). Verify does not judge freshness; see VerifyFresh.
func Verify(doc map[string]any, keys KeyResolver) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	input, _, err := verifyInto((*bp)[:0], doc, keys, nil, nil)
	if input != nil {
		*bp = input
	}
	return err
}

// verifyInto is Verify writing the signing input to dst and its layout to
// lay (when non-nil); it returns the input and the signature's value. With
// text non-nil (doc as parsed from it) and canonical, the input is cut from
// the text instead of written again.
func verifyInto(dst []byte, doc map[string]any, keys KeyResolver, lay *signedLayout, text *signedText) ([]byte, string, error) {
	c, err := checkSignature(doc, keys)
	if err != nil {
		return nil, "", err
	}
	var input []byte
	if text != nil && text.raw.canonical && text.raw.value.end > 0 && lay != nil {
		input = text.raw.signingInput(dst, text.data, doc, lay)
	} else if input, err = appendSigningLayout(dst, doc, c.sig, lay); err != nil {
		return nil, "", err
	}
	return input, c.value, c.verify(input)
}

// signedText is a document's text and what parse noted about it.
type signedText struct {
	data []byte
	raw  rawLayout
}

// sigCheck is a signature whose form passed every check; only the
// cryptographic comparison is left.
type sigCheck struct {
	sig   map[string]any
	keyID string
	value string
	raw   []byte
	pub   ed25519.PublicKey
}

func (c *sigCheck) verify(input []byte) error {
	if !verifyEd25519(c.pub, input, c.raw) {
		return Errorf(CodeAuthInvalidSignature, "signature does not match the document for key %q (wrong key or a changed member)", c.keyID).At("/signature/value")
	}
	return nil
}

// checkSignature runs Verify's checks of form, in Verify's order, up to
// the key lookup.
func checkSignature(doc map[string]any, keys KeyResolver) (*sigCheck, error) {
	if doc == nil {
		return nil, Errorf(CodeAuthInvalidSignature, "no document").At("")
	}
	sig, err := signatureObject(doc)
	if err != nil {
		return nil, err
	}
	for name := range sig {
		switch name {
		case "alg", "keyId", "createdAt", "value":
		default:
			return nil, Errorf(CodeAuthInvalidSignature, "unknown signature member %q", name).At(pointerOf([]string{"signature", name}))
		}
	}
	if alg, ok := sig["alg"].(string); !ok || alg != SignatureAlgEd25519 {
		return nil, Errorf(CodeAuthInvalidSignature, "alg must be %q", SignatureAlgEd25519).At("/signature/alg")
	}
	keyID, ok := sig["keyId"].(string)
	if !ok || !ValidKeyID(keyID) {
		return nil, Errorf(CodeAuthInvalidSignature, "keyId must be a string matching %s", keyIDPattern).At("/signature/keyId")
	}
	created, ok := sig["createdAt"].(string)
	if !ok {
		return nil, Errorf(CodeAuthInvalidSignature, "createdAt must be a time string").At("/signature/createdAt")
	}
	at, perr := ParseTime(created)
	if perr != nil {
		return nil, Errorf(CodeAuthInvalidSignature, "createdAt %q is not RFC 3339 UTC (YYYY-MM-DDTHH:MM:SS[.fff]Z)", created).At("/signature/createdAt")
	}
	if err := checkCreatedAt(doc, at); err != nil {
		return nil, err
	}
	value, ok := sig["value"].(string)
	if !ok {
		return nil, Errorf(CodeAuthInvalidSignature, "value must be a string").At("/signature/value")
	}
	raw, derr := decodeB64(value, ed25519.SignatureSize)
	if derr != nil {
		return nil, Errorf(CodeAuthInvalidSignature, "value %v", derr).At("/signature/value")
	}
	var pub ed25519.PublicKey
	if keys != nil {
		pub, ok = keys.PublicKey(keyID)
	}
	// A key of the wrong size would make ed25519.Verify panic.
	if keys == nil || !ok || len(pub) != ed25519.PublicKeySize {
		return nil, Errorf(CodeAuthInvalidSignature, "unknown key %q", keyID).At("/signature/keyId")
	}
	return &sigCheck{sig: sig, keyID: keyID, value: value, raw: raw, pub: pub}, nil
}

// CheckFreshness refuses a time more than maxSkew before now (stale) or more
// than maxSkew after it (from the future); both bounds are inclusive.
// Errors are AUTH_INVALID_SIGNATURE.
func CheckFreshness(issuedAt, now time.Time, maxSkew time.Duration) error {
	if err := checkFreshness(issuedAt, now, maxSkew); err != nil {
		return err
	}
	return nil
}

func checkFreshness(issuedAt, now time.Time, maxSkew time.Duration) *Error {
	if maxSkew < 0 {
		maxSkew = 0
	}
	if age := now.Sub(issuedAt); age > maxSkew {
		return Errorf(CodeAuthInvalidSignature, "issuedAt %s is stale: %s before now %s, allowed skew %s", NewTime(issuedAt), age, NewTime(now), maxSkew)
	}
	if ahead := issuedAt.Sub(now); ahead > maxSkew {
		return Errorf(CodeAuthInvalidSignature, "issuedAt %s is in the future: %s after now %s, allowed skew %s", NewTime(issuedAt), ahead, NewTime(now), maxSkew)
	}
	return nil
}

// VerifyFresh is Verify plus CheckFreshness of the document's issuedAt.
// Freshness applies to what a peer sends as a new request, Commands and
// HELLO proofs, which carry issuedAt; a document without issuedAt fails.
// Events (occurredAt) are replayed long after they happened and are checked
// with Verify alone.
func VerifyFresh(doc map[string]any, keys KeyResolver, now time.Time, maxSkew time.Duration) error {
	if err := Verify(doc, keys); err != nil {
		return err
	}
	return checkIssuedAt(doc, now, maxSkew)
}

// checkIssuedAt is VerifyFresh's freshness part, once Verify passed.
func checkIssuedAt(doc map[string]any, now time.Time, maxSkew time.Duration) error {
	// Verify has already held signature.createdAt equal to a valid issuedAt,
	// if present.
	s, ok := doc["issuedAt"].(string)
	if !ok {
		return Errorf(CodeAuthInvalidSignature, "issuedAt is required for a freshness check").At("/issuedAt")
	}
	t, err := ParseTime(s)
	if err != nil {
		return Errorf(CodeAuthInvalidSignature, "issuedAt %q is not a wire time", s).At("/issuedAt")
	}
	if err := checkFreshness(t.Time, now, maxSkew); err != nil {
		return err.At("/issuedAt")
	}
	return nil
}

// CheckCommandSigner refuses a Command whose signature.keyId is not a key
// of its actor (see KeyBelongsTo). Run it after Verify.
func CheckCommandSigner(doc map[string]any) error {
	actor, _ := doc["actor"].(map[string]any)
	kind, _ := actor["kind"].(string)
	id, _ := actor["id"].(string)
	sig, _ := doc["signature"].(map[string]any)
	keyID, _ := sig["keyId"].(string)
	if !KeyBelongsTo(keyID, ActorKind(kind), id) {
		return Errorf(CodeAuthInvalidSignature, "key %q is not a key of actor %s:%s", keyID, kind, id).At("/signature/keyId")
	}
	return nil
}
