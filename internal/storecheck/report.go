package storecheck

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Report is what `mwp-worker check` and `mwp-worker authority check` print
// (docs/shapes.md). OK is true only when nothing is listed in Problems.
type Report struct {
	Path  string `json:"path"`
	Store string `json:"store"` // "authority" or "worker"
	Meta  Metas  `json:"meta"`
	// StructureChecked is false when the file could not be opened far
	// enough for bbolt's check (truncated, no valid meta page).
	StructureChecked bool `json:"structureChecked"`
	// SignaturesChecked is false when no key was at hand: events were then
	// decoded and their sequences checked, not their signatures.
	SignaturesChecked bool          `json:"signaturesChecked"`
	Groups            []GroupReport `json:"groups"`
	OrgEvents         int           `json:"orgEvents"`
	Notes             []string      `json:"notes"`
	Problems          []Problem     `json:"problems"`
	OK                bool          `json:"ok"`
}

// GroupReport is one Group's stored events.
type GroupReport struct {
	GroupID string `json:"groupId"`
	Events  int    `json:"events"`
	First   uint64 `json:"first,omitempty"`
	Last    uint64 `json:"last,omitempty"`
	// Cursor is the worker's durable cursor (worker stores only).
	Cursor  *uint64 `json:"cursor,omitempty"`
	Damaged bool    `json:"damaged"`
	// Diverged says how the worker found the authority's log is not the
	// history it applied (worker stores only; docs/operations.md "A Group
	// diverged"), empty when it did not.
	Diverged string `json:"diverged,omitempty"`
}

// Problem is one finding. Where is "file", "meta", "structure", "identity",
// "head", "org" or "group"; GroupID and Sequence locate it when known.
type Problem struct {
	Where    string `json:"where"`
	GroupID  string `json:"groupId,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
	What     string `json:"what"`
}

// Add records a problem.
func (r *Report) Add(p Problem) { r.Problems = append(r.Problems, p) }

// Finish sets OK and makes the lists non-nil for JSON.
func (r *Report) Finish() {
	if r.Groups == nil {
		r.Groups = []GroupReport{}
	}
	if r.Notes == nil {
		r.Notes = []string{}
	}
	if r.Problems == nil {
		r.Problems = []Problem{}
	}
	r.OK = len(r.Problems) == 0
}

// MaxGroupProblems bounds the findings kept per Group: a wiped page can
// break every event after it.
const MaxGroupProblems = 20

// Run checks one Group's stored events in key order: each key is the
// event's 8-byte sequence, the sequences follow each other without a gap,
// the event decodes strictly, names the Group, and (Keys set) its
// signature verifies.
type Run struct {
	GroupID string
	Keys    protocol.KeyResolver
	// Next is the sequence the first event must have (0: any).
	Next     uint64
	Count    int
	First    uint64
	Last     uint64
	Problems []Problem
	dropped  int
}

// Add checks the next stored pair.
func (r *Run) Add(k, raw []byte) {
	if len(k) != 8 {
		r.fail(0, "key %x is not an 8-byte sequence", k)
		return
	}
	seq := binary.BigEndian.Uint64(k)
	if r.Count == 0 {
		r.First = seq
	}
	if r.Next != 0 && seq != r.Next {
		r.fail(seq, "sequence %d follows %d: events %d..%d are missing", seq, r.Next-1, r.Next, seq-1)
	}
	r.Count++
	r.Last, r.Next = seq, seq+1
	ev, err := Event(raw, r.Keys)
	if err != nil {
		r.fail(seq, "%v", err)
		return
	}
	if ev.GroupID != r.GroupID || ev.Seq() != seq {
		r.fail(seq, "stored under %s/%d, the event says %s/%d", r.GroupID, seq, ev.GroupID, ev.Seq())
	}
}

// Damaged reports whether any problem was found.
func (r *Run) Damaged() bool { return len(r.Problems) > 0 || r.dropped > 0 }

// Fail records a problem found outside Add (a panic, a cursor).
func (r *Run) Fail(seq uint64, format string, args ...any) { r.fail(seq, format, args...) }

func (r *Run) fail(seq uint64, format string, args ...any) {
	if len(r.Problems) >= MaxGroupProblems {
		r.dropped++
		return
	}
	r.Problems = append(r.Problems, Problem{Where: "group", GroupID: r.GroupID, Sequence: seq, What: fmt.Sprintf(format, args...)})
}

// Report returns the Group's line and its problems, with a count of those
// left out.
func (r *Run) Report() (GroupReport, []Problem) {
	ps := r.Problems
	if r.dropped > 0 {
		ps = append(ps, Problem{Where: "group", GroupID: r.GroupID, What: fmt.Sprintf("%d more problems not listed", r.dropped)})
	}
	return GroupReport{GroupID: r.GroupID, Events: r.Count, First: r.First, Last: r.Last, Damaged: r.Damaged()}, ps
}

// Event decodes one stored event strictly and, with keys, verifies its
// signature (AUTH_INVALID_SIGNATURE when it does not).
func Event(raw []byte, keys protocol.KeyResolver) (*protocol.Event, error) {
	v, err := protocol.Parse(bytes.TrimSpace(raw), protocol.DecodeOptions{})
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProtocolViolation, "a stored event is not a JSON object")
	}
	ev, _, err := protocol.InboundEvent(m, keys)
	return ev, err
}
