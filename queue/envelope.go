package queue

import (
	"bytes"

	"github.com/missionweave/mwp-worker/protocol"
)

// The envelope of a stored event is read by hand when its text has the
// canonical (RFC 8785) shape Apply stores: no space, members in order,
// none repeated, plain strings and integers. A general decoder spent as
// long on the envelope, mostly on members replay never reads (the
// signature among them), as on the payload (docs/performance.md). Any
// other text gives up, and decodeStored takes the general path, which
// reaches the same result (TestCanonicalFactSamePath, FuzzCanonicalFact).
// What is skipped is still checked to be JSON, so a text the general path
// refuses is refused here too.

// envelopeHead are the members that sort before "payload", with whether
// replay reads them; a name outside this list (one that might match a
// member case-insensitively, as the general path does) gives up.
var envelopeHead = map[string]bool{
	"acceptedBy": false, "actor": false, "aggregate": true, "causationId": false,
	"correlationId": false, "eventId": false, "extensions": false, "groupId": false,
	"occurredAt": true,
}

// canonicalFact decodes a stored event of the projected type typ (read off
// its end by trailingType) when its text is canonical: the envelope by
// hand, the payload into newPayload's target. It answers false for any
// other text, or a payload that does not decode.
func canonicalFact(groupID string, raw []byte, typ protocol.EventType) (storedEvent, bool) {
	var w inboxFact
	w.Type = typ
	// The head: members up to "payload", read forward.
	var last []byte
	i := 1
	if len(raw) < 2 || raw[0] != '{' {
		return storedEvent{}, false
	}
	for {
		name, j, ok := plainBytes(raw, i)
		if !ok || j >= len(raw) || raw[j] != ':' || bytes.Compare(name, last) <= 0 {
			return storedEvent{}, false
		}
		if string(name) == "payload" {
			i = j + 1
			break
		}
		read, known := envelopeHead[string(name)]
		if !known {
			return storedEvent{}, false
		}
		last, i = name, j+1
		end, ok := skipValue(raw, i, 0)
		if !ok || end >= len(raw) || raw[end] != ',' {
			return storedEvent{}, false
		}
		if read {
			switch string(name) {
			case "aggregate":
				if w.Aggregate, ok = plainAggregate(raw[i:end]); !ok {
					return storedEvent{}, false
				}
			case "occurredAt":
				if !bytes.HasPrefix(raw[i:end], []byte(`"`)) || w.OccurredAt.UnmarshalJSON(raw[i:end]) != nil {
					return storedEvent{}, false
				}
			}
		}
		i = end + 1
	}
	// The tail, read backward from the signature: the payload ends where
	// the members after it begin, so its bytes are not scanned here; its
	// decode below checks that they are exactly one value.
	sig := lastIndexNear(raw, []byte(`,"signature":`), 512)
	if sig < i || !signatureTail(raw, sig) {
		return storedEvent{}, false
	}
	end := sig
	var ok bool
	if w.Sequence, end, ok = trailingUint(raw[:end], `,"sequence":`); !ok {
		return storedEvent{}, false
	}
	if w.Revision, end, ok = trailingUint(raw[:end], `,"revision":`); !ok {
		return storedEvent{}, false
	}
	if end <= i || raw[i] != '{' || raw[end-1] != '}' {
		return storedEvent{}, false
	}
	p, known := newPayload(typ)
	if !known || unmarshal(raw[i:end], p) != nil {
		return storedEvent{}, false
	}
	return storedEvent{f: w.fact(groupID), payload: payloadOf(p), typed: true}, true
}

// lastIndexNear is bytes.LastIndex, looking first in the last window
// bytes of b, where the member sought lies in canonical text, and forward
// there (bytes.Index is vectorized, LastIndex is not): a search of all of
// b cost as much as the rest of the envelope.
func lastIndexNear(b, sep []byte, window int) int {
	if start := len(b) - window; start > 0 {
		last := -1
		for i := start; ; {
			j := bytes.Index(b[i:], sep)
			if j < 0 {
				break
			}
			last, i = i+j, i+j+1
		}
		if last >= 0 {
			return last
		}
	}
	return bytes.LastIndex(b, sep)
}

// signatureTail reports whether raw from sig on is `,"signature":<value>,"type":"<type>"}`.
func signatureTail(raw []byte, sig int) bool {
	i := sig + len(`,"signature":`)
	end, ok := skipValue(raw, i, 0)
	if !ok || !bytes.HasPrefix(raw[end:], []byte(`,"type":`)) {
		return false
	}
	_, end, ok = plainBytes(raw, end+len(`,"type":`))
	return ok && end == len(raw)-1 && raw[end] == '}'
}

// trailingUint reads an optional `<name><digits>` at the end of b: the
// number (0 when absent), where the member begins (len(b) when absent),
// and false for digits that are not a canonical uint64.
func trailingUint(b []byte, name string) (uint64, int, bool) {
	k := len(b)
	for k > 0 && b[k-1] >= '0' && b[k-1] <= '9' {
		k--
	}
	if !bytes.HasSuffix(b[:k], []byte(name)) {
		return 0, len(b), true
	}
	digits := b[k:]
	if len(digits) == 0 || len(digits) > 20 || (digits[0] == '0' && len(digits) > 1) {
		return 0, 0, false
	}
	var n uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, 0, false
		}
		n = n*10 + d
	}
	return n, k - len(name), true
}

// plainAggregate reads `{"id":"<id>","kind":"<kind>"}`.
func plainAggregate(b []byte) (*protocol.Aggregate, bool) {
	if !bytes.HasPrefix(b, []byte(`{"id":`)) {
		return nil, false
	}
	id, i, ok := plainString(b, len(`{"id":`))
	if !ok || !bytes.HasPrefix(b[i:], []byte(`,"kind":`)) {
		return nil, false
	}
	kind, i, ok := plainString(b, i+len(`,"kind":`))
	if !ok || i != len(b)-1 || b[i] != '}' {
		return nil, false
	}
	return &protocol.Aggregate{Kind: protocol.AggregateKind(kind), ID: id}, true
}

// plainString reads a string of printable ASCII without escapes starting
// at b[i], and returns it and the index after its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	s, end, ok := plainBytes(b, i)
	return string(s), end, ok
}

// plainBytes is plainString without the copy.
func plainBytes(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue returns the index after the JSON value starting at b[i], and
// false where the text is not JSON or is not plainly written: space
// between tokens, an escape in a string, nesting deeper than 32.
// Strings may hold any other byte from 0x20 up, as the general path's
// rules (encoding/json's) allow invalid UTF-8.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > 32 {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				return j + 1, true
			case c < 0x20 || c == '\\':
				return 0, false
			}
		}
		return 0, false
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i++
		if i < len(b) && b[i] == closer {
			return i + 1, true
		}
		for {
			if c == '{' {
				end, ok := skipValue(b, i, depth+1)
				if !ok || b[i] != '"' || end >= len(b) || b[end] != ':' {
					return 0, false
				}
				i = end + 1
			}
			end, ok := skipValue(b, i, depth+1)
			if !ok || end >= len(b) {
				return 0, false
			}
			switch b[end] {
			case ',':
				i = end + 1
			case closer:
				return end + 1, true
			default:
				return 0, false
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	}
	return skipNumber(b, i)
}

func literal(b []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, false
	}
	return i + len(lit), true
}

// skipNumber returns the index after the JSON number at b[i].
func skipNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
