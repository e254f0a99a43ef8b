package protocol

import (
	"errors"
	"slices"
)

// ValidateEventAt checks a parsed event against event.schema.json (the
// envelope, its type's payload schema and aggregate kind) and returns nil
// or the wire error: SCHEMA_VALIDATION_FAILED (WORK_CONTRACT_INCOMPLETE for
// a contract missing members) with the first problem's pointer, every
// problem in its details, each pointer prefixed with at (the event's
// place in the document that carries it, "" for none). A non-nil error
// is always a *Error.
func ValidateEventAt(doc map[string]any, at string) error {
	err := Validate("event", doc)
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		var pe *Error
		if errors.As(err, &pe) {
			return pe
		}
		return Errorf(CodeInternalError, "validate event: %v", err)
	}
	if at != "" {
		cp := *ve
		cp.Problems = slices.Clone(ve.Problems)
		for i := range cp.Problems {
			cp.Problems[i].Pointer = at + cp.Problems[i].Pointer
		}
		ve = &cp
	}
	return ve.ProtocolError()
}
