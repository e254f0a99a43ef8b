package protocol

import (
	"errors"
	"fmt"
)

// Code is one of the 27 core error codes of spec 19.
type Code string

// The core error codes (spec 19).
const (
	CodeUnsupportedVersion       Code = "UNSUPPORTED_VERSION"
	CodeAuthRequired             Code = "AUTH_REQUIRED"
	CodeAuthInvalidSignature     Code = "AUTH_INVALID_SIGNATURE"
	CodeAuthStaleSession         Code = "AUTH_STALE_SESSION"
	CodeAuthStaleCoordinator     Code = "AUTH_STALE_COORDINATOR"
	CodeAuthForbidden            Code = "AUTH_FORBIDDEN"
	CodeGroupNotFound            Code = "GROUP_NOT_FOUND"
	CodeMembershipRequired       Code = "MEMBERSHIP_REQUIRED"
	CodeMembershipStale          Code = "MEMBERSHIP_STALE"
	CodeSchemaValidationFailed   Code = "SCHEMA_VALIDATION_FAILED"
	CodeInvalidCommand           Code = "INVALID_COMMAND"
	CodeInvalidStateTransition   Code = "INVALID_STATE_TRANSITION"
	CodeRevisionConflict         Code = "REVISION_CONFLICT"
	CodeActionIDCollision        Code = "ACTION_ID_COLLISION"
	CodeUnknownCriticalExtension Code = "UNKNOWN_CRITICAL_EXTENSION"
	CodeWorkContractIncomplete   Code = "WORK_CONTRACT_INCOMPLETE"
	CodeWorkOfferExpired         Code = "WORK_OFFER_EXPIRED"
	CodeWorkAlreadyOwned         Code = "WORK_ALREADY_OWNED"
	CodeWorkLeaseExpired         Code = "WORK_LEASE_EXPIRED"
	CodeWorkStaleOwnership       Code = "WORK_STALE_OWNERSHIP"
	CodeApprovalRequired         Code = "APPROVAL_REQUIRED"
	CodeBudgetExceeded           Code = "BUDGET_EXCEEDED"
	CodeRateLimited              Code = "RATE_LIMITED"
	CodeBackpressure             Code = "BACKPRESSURE"
	CodeCursorTooOld             Code = "CURSOR_TOO_OLD"
	CodeProtocolViolation        Code = "PROTOCOL_VIOLATION"
	CodeInternalError            Code = "INTERNAL_ERROR"
)

// Codes lists every core error code in the order of spec 19.
var Codes = []Code{
	CodeUnsupportedVersion, CodeAuthRequired, CodeAuthInvalidSignature,
	CodeAuthStaleSession, CodeAuthStaleCoordinator, CodeAuthForbidden,
	CodeGroupNotFound, CodeMembershipRequired, CodeMembershipStale,
	CodeSchemaValidationFailed, CodeInvalidCommand, CodeInvalidStateTransition,
	CodeRevisionConflict, CodeActionIDCollision, CodeUnknownCriticalExtension,
	CodeWorkContractIncomplete, CodeWorkOfferExpired, CodeWorkAlreadyOwned,
	CodeWorkLeaseExpired, CodeWorkStaleOwnership, CodeApprovalRequired,
	CodeBudgetExceeded, CodeRateLimited, CodeBackpressure, CodeCursorTooOld,
	CodeProtocolViolation, CodeInternalError,
}

// Retryable reports whether a request that failed with c is safe to resend
// unchanged (docs/wire.md): only transient capacity and internal failures are.
// Every other code needs a corrected or new command (spec 19).
func (c Code) Retryable() bool {
	switch c {
	case CodeBackpressure, CodeRateLimited, CodeInternalError:
		return true
	}
	return false
}

// Known reports whether c is one of the 27 core codes.
func (c Code) Known() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// Error is a machine-readable protocol error (error.schema.json). Pointer is
// not on the wire: it locates the offending value for local tools and is
// copied into Details["pointer"] when the error is sent.
type Error struct {
	Code      Code           `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	InReplyTo string         `json:"inReplyTo,omitempty"`
	ActionID  string         `json:"actionId,omitempty"`
	Details   map[string]any `json:"details,omitempty"`
	Pointer   string         `json:"-"`
}

// Errorf builds an *Error with code c; retryable follows the code.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...), Retryable: c.Retryable()}
}

// At returns e with its JSON pointer set.
func (e *Error) At(pointer string) *Error {
	e.Pointer = pointer
	return e
}

// Under returns err located inside the member at prefix: a copy of a
// *Error with prefix before its pointer (a check of a nested document
// reported at the enclosing command's path); any other error unchanged.
func Under(err error, prefix string) error {
	pe, ok := err.(*Error)
	if !ok || prefix == "" {
		return err
	}
	c := *pe
	c.Pointer = prefix + c.Pointer
	return &c
}

func (e *Error) Error() string {
	if e.Pointer != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Pointer, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// PointerOf is the JSON pointer err locates: a *Error's Pointer, or for
// one received over the wire its details' "pointer"; "" for none.
func PointerOf(err error) string {
	var pe *Error
	if !errors.As(err, &pe) {
		return ""
	}
	if pe.Pointer != "" {
		return pe.Pointer
	}
	p, _ := pe.Details["pointer"].(string)
	return p
}

// Is matches another *Error by code, so errors.Is(err, &Error{Code: c}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the protocol code carried by err, or INTERNAL_ERROR.
func CodeOf(err error) Code {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternalError
}

// Forbidden is AUTH_FORBIDDEN: the actor may not do this here.
func Forbidden(format string, args ...any) *Error {
	return Errorf(CodeAuthForbidden, format, args...)
}

// InvalidCommand is INVALID_COMMAND: the command is wrong whatever the state.
func InvalidCommand(format string, args ...any) *Error {
	return Errorf(CodeInvalidCommand, format, args...)
}

// InvalidTransition is INVALID_STATE_TRANSITION: the aggregate's state does
// not allow the command.
func InvalidTransition(format string, args ...any) *Error {
	return Errorf(CodeInvalidStateTransition, format, args...)
}

// WithDetails adds key, value pairs to e's details and returns e.
func WithDetails(e *Error, kv ...any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Details[kv[i].(string)] = kv[i+1]
	}
	return e
}

// MetricResult is what a sender got for a command, as a metric label:
// "accepted", the refusal's code, or "transport" when no answer came (an
// error that carries no *Error: the connection's, the sender's own).
func MetricResult(err error) string {
	var pe *Error
	switch {
	case err == nil:
		return "accepted"
	case errors.As(err, &pe):
		return string(pe.Code)
	}
	return "transport"
}
