package group

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/missionweave/mwp-worker/protocol"
)

// A Group Snapshot (spec 16) is what a reader behind a compacted log
// restores: the authority answers CURSOR_TOO_OLD with its reference
// (SnapshotRefOf), the reader fetches the document, checks it
// (CheckSnapshot) and continues from its state (FromSnapshot) after its
// sequence. The worker's store and the coordinator's view restore through
// these same three steps.

// SnapshotRefOf reads details.snapshot of a CURSOR_TOO_OLD error.
func SnapshotRefOf(e *protocol.Error) (protocol.SnapshotRef, bool) {
	v, ok := e.Details["snapshot"]
	if !ok {
		return protocol.SnapshotRef{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return protocol.SnapshotRef{}, false
	}
	var ref protocol.SnapshotRef
	if err := json.Unmarshal(b, &ref); err != nil || ref.GroupID == "" || ref.SnapshotID == "" {
		return protocol.SnapshotRef{}, false
	}
	return ref, true
}

// CheckSnapshot parses, hashes, verifies and decodes a snapshot document:
// its JCS digest must equal ref.Digest, verify (given the parsed document:
// pass protocol.Verify bound to the authority's key) must accept its
// signature, and it must be the snapshot ref names. It returns the
// snapshot and its JCS bytes.
func CheckSnapshot(ref protocol.SnapshotRef, doc []byte, verify func(map[string]any) error) (*protocol.GroupSnapshot, []byte, error) {
	v, err := protocol.Parse(doc, protocol.DecodeOptions{MaxBytes: 1 << 30})
	if err != nil {
		return nil, nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "a Group Snapshot is a JSON object")
	}
	raw, err := protocol.Canonical(v)
	if err != nil {
		return nil, nil, err
	}
	if d := protocol.Digest(raw); d != ref.Digest {
		return nil, nil, protocol.Errorf(protocol.CodeProtocolViolation, "snapshot %s digest is %s, the reference says %s", ref.SnapshotID, d, ref.Digest)
	}
	if verify == nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "snapshot restore needs a signature check")
	}
	if err := verify(m); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, nil, err
		}
		return nil, nil, protocol.Errorf(protocol.CodeAuthInvalidSignature, "snapshot %s: %v", ref.SnapshotID, err)
	}
	snap := new(protocol.GroupSnapshot)
	if err := protocol.DecodeExactParsed(raw, v, snap, protocol.CodeSchemaValidationFailed); err != nil {
		return nil, nil, err
	}
	if snap.SnapshotID != ref.SnapshotID || snap.GroupID != ref.GroupID || snap.Sequence != ref.Sequence {
		return nil, nil, protocol.Errorf(protocol.CodeProtocolViolation,
			"snapshot is %s of group %s at %d, the reference names %s of group %s at %d",
			snap.SnapshotID, snap.GroupID, snap.Sequence, ref.SnapshotID, ref.GroupID, ref.Sequence)
	}
	for i, wi := range snap.WorkItems {
		if wi.GroupID != snap.GroupID || wi.WorkItemID == "" {
			return nil, nil, protocol.Errorf(protocol.CodeSchemaValidationFailed,
				"snapshot work item %q belongs to group %q", wi.WorkItemID, wi.GroupID).At(fmt.Sprintf("/workItems/%d", i))
		}
	}
	return snap, raw, nil
}

// FromSnapshot is the Group state a checked snapshot holds: its Mission
// and WorkItems, each with the latest approved execution approval of its
// contract. What the snapshot does not carry (proposals, Context Package
// heads, lease counters) starts empty; Fold continues from it with the
// events after snap.Sequence.
func FromSnapshot(snap *protocol.GroupSnapshot, limits Limits) *Group {
	g := NewGroup(snap.GroupID, limits)
	m := snap.Mission
	g.Mission = &m
	approval := make(map[string]*protocol.Approval) // the latest execution approval per item
	for i := range snap.Approvals {
		a := &snap.Approvals[i]
		if a.Kind != protocol.ApprovalExecution || a.Decision != protocol.DecisionApproved || a.ContractRevision == nil {
			continue
		}
		if prev := approval[a.WorkItemID]; prev == nil || *a.ContractRevision >= *prev.ContractRevision {
			approval[a.WorkItemID] = a
		}
	}
	for _, wi := range snap.WorkItems {
		w := &WorkItem{WorkItem: wi, ExecutionApproval: approval[wi.WorkItemID]}
		if o := wi.Ownership; o != nil {
			w.LastOwnershipEpoch = o.OwnershipEpoch
		}
		g.Items[wi.WorkItemID] = w
	}
	return g
}
