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
