package protocol

import (
	"crypto/ed25519"
	"slices"
	"strconv"
	"unicode/utf8"
)

// An Event's signed bytes are written once, from the typed value: the
// envelope member by member in RFC 8785 order, the payload (JSON that
// encoding/json wrote) canonicalized in one pass. They are the signing
// input, signature.value aside; "value" sorts last among alg, createdAt,
// keyId and value, so the signed document is the same bytes with
// `,"value":"…"` put in before the signature object's closing brace. The
// result is byte for byte what marshalling the Event, parsing it, signing
// the parsed document and writing its canonical bytes gave (signByDocument,
// which Commands with extensions and other documents still take): a test
// holds the two equal. Commands without extensions are written the same
// way (signcommand.go).

// valueMember is the length of `,"value":"` + 86 base64url characters + `"`.
const valueMember = len(`,"value":"`) + 86 + 1

// signEvent is SignedEvent.
func signEvent(ev *Event, k PrivateKey) ([]byte, error) {
	buf, lay, err := unsignedEvent(ev, k)
	if err != nil {
		return nil, err
	}
	return spliceSignature(ev, k, buf, lay.cut), nil
}

// eventLayout is where appendUnsignedEvent put the signature's value (cut)
// and the payload and extensions values (end 0: not written).
type eventLayout struct {
	cut                 int
	payload, extensions span
}

// unsignedEvent sets ev's signature (but its value) and returns its
// signing input with its layout.
func unsignedEvent(ev *Event, k PrivateKey) ([]byte, eventLayout, error) {
	ev.Signature = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: ev.OccurredAt}
	if err := k.check(); err != nil {
		return nil, eventLayout{}, err
	}
	// Room for the envelope, and for the payload twice: its objects are
	// put in order after their members are read.
	return appendUnsignedEvent(make([]byte, 0, 2*len(ev.Payload)+512+valueMember), ev)
}

// spliceSignature signs the signing input buf and inserts the value at cut.
func spliceSignature(ev *Event, k PrivateKey, buf []byte, cut int) []byte {
	buf, ev.Signature.Value = spliceValue(k, buf, cut)
	ev.Signature.CreatedAt = NewTime(ev.OccurredAt.Time)
	return buf
}

// spliceValue signs the signing input buf, inserts `,"value":"…"` at cut
// and returns the signed bytes and the value.
func spliceValue(k PrivateKey, buf []byte, cut int) ([]byte, string) {
	sig := ed25519.Sign(k.Key, buf)
	n := len(buf)
	buf = slices.Grow(buf, valueMember)[:n+valueMember]
	copy(buf[cut+valueMember:], buf[cut:n])
	v := buf[cut : cut+valueMember]
	copy(v, `,"value":"`)
	b64.Encode(v[10:valueMember-1], sig)
	v[valueMember-1] = '"'
	return buf, string(v[10 : valueMember-1])
}

// appendUnsignedEvent appends the signing input of ev signed by
// ev.Signature (alg, keyId; createdAt is occurredAt) and returns its
// layout: the offset of the signature object's closing brace in the result
// and the spans of the payload and extensions.
func appendUnsignedEvent(dst []byte, ev *Event) ([]byte, eventLayout, error) {
	var lay eventLayout
	at, err := stampOf(ev.OccurredAt, "/occurredAt")
	if err != nil {
		return nil, lay, err
	}
	w := envelopeWriter{b: dst}
	w.member(`{"acceptedBy":`)
	w.str(ev.AcceptedBy)
	w.actor(ev.Actor)
	if a := ev.Aggregate; a != nil {
		w.member(`,"aggregate":{"id":`)
		w.str(a.ID)
		w.member(`,"kind":`)
		w.str(string(a.Kind))
		w.member(`}`)
	}
	w.member(`,"causationId":`)
	w.str(ev.CausationID)
	w.member(`,"correlationId":`)
	w.str(ev.CorrelationID)
	w.member(`,"eventId":`)
	w.str(ev.EventID)
	if len(ev.Extensions) > 0 {
		w.member(`,"extensions":`)
		if w.err == nil {
			start := len(w.b)
			w.b, w.err = appendCanonicalExtensions(w.b, ev.Extensions)
			lay.extensions = span{start, len(w.b)}
		}
	}
	if ev.GroupID != "" {
		w.member(`,"groupId":`)
		w.str(ev.GroupID)
	}
	w.member(`,"occurredAt":"`)
	w.member(at)
	w.member(`","payload":`)
	if w.err == nil {
		lay.payload.start = len(w.b)
		if ev.Payload == nil {
			w.b = append(w.b, "null"...)
		} else {
			// The payload is one level below the event object.
			w.b, w.err = appendCanonicalText(w.b, ev.Payload, 1, DefaultMaxDepth)
		}
		lay.payload.end = len(w.b)
	}
	if ev.Revision != nil {
		w.member(`,"revision":`)
		w.uint(*ev.Revision)
	}
	if ev.Sequence != nil {
		w.member(`,"sequence":`)
		w.uint(*ev.Sequence)
	}
	lay.cut = w.signature(ev.Signature, at)
	w.member(`,"type":`)
	w.str(string(ev.Type))
	w.member(`}`)
	if w.err != nil {
		return nil, eventLayout{}, w.err
	}
	return w.b, lay, nil
}

// appendCanonicalExtensions appends the JCS bytes of an extensions member.
// Events rarely carry one, so it takes the general path.
func appendCanonicalExtensions(dst []byte, exts Extensions) ([]byte, error) {
	doc := make(map[string]any, len(exts))
	for uri, e := range exts {
		var data any
		if e.Data != nil {
			v, err := Parse(e.Data, DecodeOptions{})
			if err != nil {
				return nil, Errorf(CodeInternalError, "extension %s: %v", uri, err).At(pointerOf([]string{"extensions", uri, "data"}))
			}
			data = v
		}
		doc[uri] = map[string]any{"critical": e.Critical, "data": data}
	}
	b, err := Canonical(doc)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// envelopeWriter appends members and keeps the first error.
type envelopeWriter struct {
	b   []byte
	err error
}

func (w *envelopeWriter) member(s string) { w.b = append(w.b, s...) }

// stampOf is t's wire form, refused outside the years RFC 3339 writes.
func stampOf(t Time, pointer string) (string, error) {
	if y := t.Time.UTC().Year(); y < 0 || y > 9999 {
		return "", Errorf(CodeInternalError, "time year %d is outside 0000–9999", y).At(pointer)
	}
	return t.String(), nil
}

// actor writes the actor member after the first.
func (w *envelopeWriter) actor(a Actor) {
	w.member(`,"actor":{"id":`)
	w.str(a.ID)
	w.member(`,"kind":`)
	w.str(string(a.Kind))
	w.member(`}`)
}

// signature writes the signature member without its value (createdAt is
// at) and returns where the value goes: before the object's closing brace.
func (w *envelopeWriter) signature(sig Signature, at string) int {
	w.member(`,"signature":{"alg":`)
	w.str(sig.Alg)
	w.member(`,"createdAt":"`)
	w.member(at)
	w.member(`","keyId":`)
	w.str(sig.KeyID)
	w.member(`}`)
	return len(w.b) - 1
}

func (w *envelopeWriter) str(s string) {
	if w.err == nil {
		w.b, w.err = appendMarshalledString(w.b, s)
	}
}

func (w *envelopeWriter) uint(v uint64) {
	if v > MaxSafeInteger && w.err == nil {
		w.err = Errorf(CodeProtocolViolation, "integer %d is beyond ±(2^53−1)", v)
	}
	w.b = strconv.AppendUint(w.b, v, 10)
}

// appendMarshalledString appends the JCS form of s as encoding/json and
// Parse leave it: each byte of invalid UTF-8 becomes U+FFFD (encoding/json
// writes \ufffd), a noncharacter is refused (Parse refuses it), and only
// what RFC 8785 requires is escaped.
func appendMarshalledString(dst []byte, s string) ([]byte, error) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscaped(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		if isNoncharacter(r) {
			return nil, Errorf(CodeProtocolViolation, "Unicode noncharacter U+%04X in string %q", r, s)
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}
