package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/missionweave/mwp-worker/protocol"
)

// Divergence on the routes (docs/operations.md "A Group diverged"). A
// reader that follows a Group with a cursor (a coordinator, `mission status
// --watch`) meets an authority restored from an older copy as the worker
// does on the binding: its log ends before the cursor, or it issued other
// events under sequences the reader already took. Reading after the cursor
// alone shows neither: the reader would wait for sequences the authority
// reuses and take them on top of the old history. So a read that continues
// from where the last one ended starts OverlapEvents below it, and the
// events read again are compared with those the reader was given: an answer
// that ends before the cursor is PROTOCOL_VIOLATION ahead_of_log (as the
// binding's, and the events route's for a position past the log), another
// document at a sequence is PROTOCOL_VIOLATION diverged. Once diverged, a
// Group's every later read is refused the same way: nothing of the restored
// history reaches the reader; a new process (which reads the log afresh)
// is its resync.

// OverlapEvents is how many of the newest events given out a read asks for
// again (the worker's queue.OverlapEvents).
const OverlapEvents = 4

// ReasonDiverged is details.reason of the refusal of a read whose overlap
// holds another document than the reader was given.
const ReasonDiverged = "diverged"

// reasonAheadOfLog is the binding's details.reason for a log that ends
// before the reader's position (wss.ReasonAheadOfLog).
const reasonAheadOfLog = "ahead_of_log"

// tails holds, per Group, the newest events Events returned.
type tails struct {
	mu sync.Mutex
	m  map[string]*tail
}

type tail struct {
	held     []SignedEvent // consecutive, newest last, at most OverlapEvents
	diverged *protocol.Error
}

// cursor is the last sequence given out (0: none).
func (t *tail) cursor() uint64 {
	if len(t.held) == 0 {
		return 0
	}
	return t.held[len(t.held)-1].Sequence
}

func (ts *tails) get(groupID string) *tail {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]*tail{}
	}
	t := ts.m[groupID]
	if t == nil {
		t = &tail{}
		ts.m[groupID] = t
	}
	return t
}

// plan is where a read of groupID after after starts: below after by the
// events held when after continues the last read, else after itself. A
// diverged Group's refusal comes back instead.
func (ts *tails) plan(groupID string, after uint64) (from uint64, overlap []SignedEvent, err error) {
	t := ts.get(groupID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.diverged != nil {
		return 0, nil, t.diverged
	}
	if after == 0 || after != t.cursor() {
		return after, nil, nil
	}
	return t.held[0].Sequence - 1, append([]SignedEvent(nil), t.held...), nil
}

// refused keeps a refusal of a read that says the log is not the one the
// Group's reader was given (ahead_of_log), so every later read says it.
func (ts *tails) refused(groupID string, err error) error {
	var e *protocol.Error
	if !errors.As(err, &e) || e.Code != protocol.CodeProtocolViolation || e.Details["reason"] != reasonAheadOfLog {
		return err
	}
	t := ts.get(groupID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.cursor() > 0 && t.diverged == nil {
		t.diverged = e
	}
	return err
}

// settle compares a page read from plan's position (from, below after by
// overlap) with the overlap and returns the events after after; it keeps
// the newest given out. complete says the page holds all the log has past
// from (no max cut it): only then does a page that ends before after show
// a log that ends there.
func (ts *tails) settle(groupID string, from, after uint64, overlap, page []SignedEvent, complete bool) ([]SignedEvent, error) {
	t := ts.get(groupID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.diverged != nil {
		return nil, t.diverged
	}
	i := 0
	for ; i < len(page) && page[i].Sequence <= after; i++ {
		for _, held := range overlap {
			if held.Sequence == page[i].Sequence && !bytes.Equal(held.Raw, page[i].Raw) {
				t.diverged = divergedError(groupID, held, page[i])
				return nil, t.diverged
			}
		}
	}
	if len(overlap) > 0 && complete && i == len(page) {
		last := from
		if len(page) > 0 {
			last = page[len(page)-1].Sequence
		}
		if last < after {
			t.diverged = aheadOfLog(groupID, after, last)
			return nil, t.diverged
		}
	}
	rest := page[i:]
	switch cur := t.cursor(); {
	case after > cur:
		t.held = nil
		fallthrough
	case after == cur:
		t.held = append(t.held, rest...)
		if n := len(t.held) - OverlapEvents; n > 0 {
			t.held = append([]SignedEvent(nil), t.held[n:]...)
		}
	}
	return rest, nil
}

func aheadOfLog(groupID string, seq, last uint64) *protocol.Error {
	e := protocol.Errorf(protocol.CodeProtocolViolation,
		"group %s: the authority's log ends at %d, before sequence %d this reader was given: the log is not the history it followed (the authority was restored from an older copy?)",
		groupID, last, seq)
	return protocol.WithDetails(e, "groupId", groupID, "reason", reasonAheadOfLog, "sequence", seq, "lastSequence", last)
}

func divergedError(groupID string, held, got SignedEvent) *protocol.Error {
	e := protocol.Errorf(protocol.CodeProtocolViolation,
		"group %s diverged at sequence %d: the authority now sends event %s where this reader was given %s (the authority was restored from an older copy?)",
		groupID, held.Sequence, eventID(got.Raw), eventID(held.Raw))
	return protocol.WithDetails(e, "groupId", groupID, "reason", ReasonDiverged, "sequence", held.Sequence,
		"storedEventId", eventID(held.Raw), "receivedEventId", eventID(got.Raw))
}

func eventID(raw []byte) string {
	var ev struct {
		EventID string `json:"eventId"`
	}
	_ = json.Unmarshal(raw, &ev)
	return ev.EventID
}
