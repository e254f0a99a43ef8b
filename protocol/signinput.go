package protocol

import (
	"slices"
)

// A signing input is written once. Besides the bytes, appendSigned notes
// where the signature's value goes back in (in JCS order among the other
// signature members, known or not) and where the
// payload and each extension's data lie, so an inbound Command's canonical
// bytes, its payload and its extension data are slices and splices of the
// same buffer instead of three more canonical writes of the same tree.

// span is a value's [start, end) in a canonical buffer.
type span struct{ start, end int }

// extSpan is the span of extensions[uri].data.
type extSpan struct {
	uri string
	span
}

// signedLayout is where appendSigned put what a Command's decode reuses.
type signedLayout struct {
	cut      int  // where the value member goes in the signature object
	sigFirst bool // no signature member sorts before value: no comma before it
	sigAfter bool // some member sorts after value: a comma follows it
	payload  span // end 0: no payload member
	exts     []extSpan
}

// appendSigned appends the JCS bytes of doc with sig standing in for its
// signature member, sig's value left out. With lay non-nil it records the
// layout. Errors are AppendCanonical's, met in the same order.
func appendSigned(dst []byte, doc, sig map[string]any, lay *signedLayout) ([]byte, error) {
	var arr [24]string
	keys := appendKeys(arr[:0], doc)
	if _, ok := doc["signature"]; !ok {
		keys = append(keys, "signature")
	}
	sortKeys(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalString(dst, k)
		dst = append(dst, ':')
		switch {
		case k == "signature":
			if dst, err = appendSignatureInput(dst, sig, lay); err != nil {
				return nil, err
			}
		case k == "payload" && lay != nil:
			start := len(dst)
			if dst, err = AppendCanonical(dst, doc[k]); err != nil {
				return nil, err
			}
			lay.payload = span{start, len(dst)}
		case k == "extensions" && lay != nil:
			if dst, err = appendExtensionsLayout(dst, doc[k], lay); err != nil {
				return nil, err
			}
		default:
			if dst, err = AppendCanonical(dst, doc[k]); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, '}'), nil
}

// appendSignatureInput writes sig without its value member.
func appendSignatureInput(dst []byte, sig map[string]any, lay *signedLayout) ([]byte, error) {
	var arr [8]string
	keys := arr[:0]
	for k := range sig {
		if k != "value" {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	dst = append(dst, '{')
	placed := false
	var err error
	for i, k := range keys {
		if lay != nil && !placed && compareUTF16(k, "value") > 0 {
			lay.cut, lay.sigFirst, lay.sigAfter = len(dst), i == 0, true
			placed = true
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalString(dst, k)
		dst = append(dst, ':')
		if dst, err = AppendCanonical(dst, sig[k]); err != nil {
			return nil, err
		}
	}
	if lay != nil && !placed {
		lay.cut, lay.sigFirst, lay.sigAfter = len(dst), len(keys) == 0, false
	}
	return append(dst, '}'), nil
}

// appendExtensionsLayout writes an extensions member and notes each data.
func appendExtensionsLayout(dst []byte, v any, lay *signedLayout) ([]byte, error) {
	exts, ok := v.(map[string]any)
	if !ok {
		return AppendCanonical(dst, v)
	}
	var arr [8]string
	uris := sortKeys(appendKeys(arr[:0], exts))
	dst = append(dst, '{')
	var err error
	for i, uri := range uris {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalString(dst, uri)
		dst = append(dst, ':')
		entry, ok := exts[uri].(map[string]any)
		if !ok {
			if dst, err = AppendCanonical(dst, exts[uri]); err != nil {
				return nil, err
			}
			continue
		}
		var karr [4]string
		keys := sortKeys(appendKeys(karr[:0], entry))
		dst = append(dst, '{')
		for j, k := range keys {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalString(dst, k)
			dst = append(dst, ':')
			start := len(dst)
			if dst, err = AppendCanonical(dst, entry[k]); err != nil {
				return nil, err
			}
			if k == "data" {
				lay.exts = append(lay.exts, extSpan{uri, span{start, len(dst)}})
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// appendSignedValue returns the signed document's canonical bytes: input
// (written by appendSigned with lay) with the value member spliced in.
func appendSignedValue(dst, input []byte, lay *signedLayout, value string) []byte {
	dst = append(dst, input[:lay.cut]...)
	if !lay.sigFirst {
		dst = append(dst, ',')
	}
	dst = append(dst, `"value":`...)
	dst = appendCanonicalString(dst, value)
	if lay.sigFirst && lay.sigAfter {
		dst = append(dst, ',')
	}
	return append(dst, input[lay.cut:]...)
}

// extData returns the span of extensions[uri].data, if written.
func (lay *signedLayout) extData(uri string) (span, bool) {
	for _, e := range lay.exts {
		if e.uri == uri {
			return e.span, true
		}
	}
	return span{}, false
}

func appendKeys(dst []string, m map[string]any) []string {
	for k := range m {
		dst = append(dst, k)
	}
	return dst
}

// sortKeys puts member names in JCS order: by insertion for the small
// objects documents are made of, else by slices.SortFunc.
func sortKeys(keys []string) []string {
	if len(keys) > 16 {
		slices.SortFunc(keys, compareUTF16)
		return keys
	}
	for i := 1; i < len(keys); i++ {
		k := keys[i]
		j := i
		for ; j > 0 && compareUTF16(keys[j-1], k) > 0; j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = k
	}
	return keys
}

// A signed document that arrives in canonical form (as this package writes
// it) needs no second canonical pass: its signing input is the text with
// the signature's value member cut out. parse notes, besides whether the
// text is canonical, where that member and the parts signedLayout records
// lie in it.

// rawLayout is what parse noted about the text of a document.
type rawLayout struct {
	canonical bool // the text is the JCS bytes of its value
	// value is the /signature/value member, from its name to the end of
	// its value; first: no member before it, after: some member after it.
	value        span
	first, after bool
	payload      span // end 0: none
	exts         []extSpan
}

// note records member name (the i-th of its object, its name at nameAt and
// its value at valueAt, ending at p.pos) when it is one rawLayout keeps.
func (p *parser) note(name string, i, nameAt, valueAt int) {
	r := p.raw
	switch {
	case len(p.path) == 0 && name == "payload":
		r.payload = span{valueAt, p.pos}
	case len(p.path) == 1 && p.path[0] == "signature" && name == "value":
		// Only a canonical text is cut, and it has no space before a comma.
		r.value, r.first = span{nameAt, p.pos}, i == 0
		r.after = p.pos < len(p.data) && p.data[p.pos] == ','
	case len(p.path) == 2 && p.path[0] == "extensions" && name == "data":
		r.exts = append(r.exts, extSpan{p.path[1], span{valueAt, p.pos}})
	}
}

// signingInput appends the signing input of data, a canonical signed
// document (doc as parsed) whose signature's value parse found, and sets
// lay as appendSigned would.
func (r *rawLayout) signingInput(dst, data []byte, doc map[string]any, lay *signedLayout) []byte {
	cut, end := r.value.start, r.value.end
	switch {
	case !r.first:
		cut-- // the comma before it
	case r.after:
		end++ // the comma after it
	}
	dst = append(dst, data[:cut]...)
	dst = append(dst, data[end:]...)
	shift := func(s span) span {
		if s.start >= end {
			s.start -= end - cut
			s.end -= end - cut
		}
		return s
	}
	lay.cut, lay.sigFirst, lay.sigAfter = cut, r.first, r.after
	if r.payload.end > 0 {
		lay.payload = shift(r.payload)
	}
	if _, ok := doc["extensions"].(map[string]any); !ok {
		return dst // appendSigned notes data only under an object
	}
	for _, e := range r.exts {
		lay.exts = append(lay.exts, extSpan{e.uri, shift(e.span)})
	}
	return dst
}
