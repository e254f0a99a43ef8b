package protocol

// CheckDocument runs every structural check a document gets without keys:
// strict I-JSON decoding, the named schema (or the one detected from the
// document when schema is ""), unknown critical extensions, and for
// Commands the epoch rules of spec 15.1 — for a bare Command and for the
// Command inside a COMMAND frame. It returns the schema used, and nil or the
// first failing check's error: *ValidationError for schema problems,
// *Error otherwise.
func CheckDocument(data []byte, schema string, opts DecodeOptions) (string, error) {
	doc, err := Parse(data, opts)
	if err != nil {
		return schema, err
	}
	if schema == "" {
		if schema, err = DetectSchema(doc); err != nil {
			return "", err
		}
	}
	if err := Validate(schema, doc); err != nil {
		return schema, err
	}
	var cmd, evt any
	switch schema {
	case "command":
		cmd = doc
	case "event":
		evt = doc
	case "websocket-frame":
		m := doc.(map[string]any) // the frame schema requires an object
		cmd, evt = m["command"], m["event"]
	}
	cmdPrefix, evtPrefix := "", ""
	if schema == "websocket-frame" {
		cmdPrefix, evtPrefix = "/command", "/event"
	}
	if cmd != nil {
		if err := CheckExtensions(cmd, KnownExtension); err != nil {
			return schema, withPrefix(err, cmdPrefix)
		}
		if err := CheckCommandEpochs(cmd); err != nil {
			return schema, withPrefix(err, cmdPrefix)
		}
	}
	if evt != nil {
		if err := CheckExtensions(evt, KnownExtension); err != nil {
			return schema, withPrefix(err, evtPrefix)
		}
	}
	return schema, nil
}

func withPrefix(err error, prefix string) error {
	if pe, ok := err.(*Error); ok && prefix != "" {
		pe.Pointer = prefix + pe.Pointer
	}
	return err
}
