package toolkeys

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// State is where an operation stands in the ledger.
type State string

const (
	// StateStarted: an attempt was durably begun and has not been
	// recorded as finished. In a fresh process this means the attempt
	// was interrupted by a crash and its effect is in doubt; the next Do
	// retries with the same key so the service can deduplicate it.
	StateStarted State = "started"
	// StateFailed: the last attempt returned an error; Do may retry.
	StateFailed State = "failed"
	// StateFailedPermanently: an attempt returned a Permanent error; Do
	// returns ErrPermanent without calling again.
	StateFailedPermanently State = "failed_permanently"
	// StateCompleted: an attempt succeeded; Do returns its result forever.
	StateCompleted State = "completed"
)

// Record is the ledger's entry for one idempotency key.
type Record struct {
	Key       string    `json:"-"` // the bucket key; not repeated in the value
	Op        Op        `json:"op"`
	State     State     `json:"state"`
	Attempts  uint64    `json:"attempts"`         // attempts begun, across restarts
	Result    []byte    `json:"result,omitempty"` // the completed attempt's bytes
	Error     string    `json:"error,omitempty"`  // the last failed attempt's message
	StartedAt time.Time `json:"startedAt"`        // first attempt
	UpdatedAt time.Time `json:"updatedAt"`
}

// maxErrorLen bounds the stored error message: records stay small.
const maxErrorLen = 512

var (
	// ErrExhausted is returned, without calling, once an operation has
	// used its attempt budget without completing.
	ErrExhausted = errors.New("toolkeys: attempt budget exhausted")
	// ErrPermanent is returned, without calling, for an operation whose
	// attempt failed with a Permanent error.
	ErrPermanent = errors.New("toolkeys: operation failed permanently")
)

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err so the ledger never retries the operation: a Call
// returns Permanent(err) when the service refused the request for good.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err carries Permanent's mark.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

func encodeRecord(r *Record) ([]byte, error) {
	return json.Marshal(r)
}

// decodeRecord reads a stored record; key is its bucket key. The bytes
// come from our own file, but a damaged file must give an error, not a
// record that replays a wrong result.
func decodeRecord(key string, v []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return Record{}, fmt.Errorf("toolkeys: record %s: %w", key, err)
	}
	switch r.State {
	case StateStarted, StateFailed, StateFailedPermanently, StateCompleted:
	default:
		return Record{}, fmt.Errorf("toolkeys: record %s: unknown state %q", key, r.State)
	}
	if r.Attempts == 0 {
		return Record{}, fmt.Errorf("toolkeys: record %s: no attempt", key)
	}
	r.Key = key
	return r, nil
}

// verdict is what Do does next for an operation.
type verdict int

const (
	verdictStart  verdict = iota // begin attempt rec.Attempts+1
	verdictReplay                // return the recorded result
	verdictRefuse                // return the error, never call
)

// decide is Do's whole policy: given the WorkItem's fence, the operation's
// record (nil if none) and its attempt budget (0: unlimited), whether to
// start an attempt, replay, or refuse.
func decide(op Op, fence uint64, rec *Record, maxAttempts uint64) (verdict, error) {
	if op.OwnershipEpoch < fence {
		return verdictRefuse, protocol.Errorf(protocol.CodeWorkStaleOwnership,
			"toolkeys: ownership epoch %d of work item %s is fenced (current epoch %d)", op.OwnershipEpoch, op.WorkItemID, fence)
	}
	if rec == nil {
		return verdictStart, nil
	}
	switch rec.State {
	case StateCompleted:
		return verdictReplay, nil
	case StateFailedPermanently:
		return verdictRefuse, fmt.Errorf("%w after attempt %d: %s", ErrPermanent, rec.Attempts, rec.Error)
	}
	if maxAttempts > 0 && rec.Attempts >= maxAttempts {
		last := rec.Error
		if rec.State == StateStarted {
			last = "the last attempt was interrupted; its outcome is unknown"
		}
		return verdictRefuse, fmt.Errorf("%w (%d of %d): %s", ErrExhausted, rec.Attempts, maxAttempts, last)
	}
	return verdictStart, nil
}

// finish records an attempt's outcome in rec.
func finish(rec *Record, val []byte, callErr error, now time.Time) {
	rec.UpdatedAt = now
	switch {
	case callErr == nil:
		rec.State, rec.Result, rec.Error = StateCompleted, val, ""
	case IsPermanent(callErr):
		rec.State, rec.Error = StateFailedPermanently, truncate(callErr.Error())
	default:
		rec.State, rec.Error = StateFailed, truncate(callErr.Error())
	}
}

func truncate(s string) string {
	if len(s) <= maxErrorLen {
		return s
	}
	// Cut on a rune boundary so the stored text stays valid UTF-8.
	i := maxErrorLen
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
