package group

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// The execution half of spec 10.2: checkpoint, block/unblock, submit,
// review, failure, cancellation, lease renewal and linked child outcomes.

// leased runs the worker-side checks every lease-bound command shares.
func (t *txn) leased(workItemID string, epoch uint64, leaseID string) (*WorkItem, error) {
	if err := t.requireAgent(); err != nil {
		return nil, err
	}
	w, err := t.existing(workItemID)
	if err != nil {
		return nil, err
	}
	if err := w.CheckLease(t.in.Actor.ID, t.in.SessionEpoch, epoch, leaseID, t.now); err != nil {
		return nil, err
	}
	if err := t.inState(w, protocol.WorkActive); err != nil {
		return nil, err
	}
	return w, nil
}

// ownedQueued resolves a WorkItem its owner names by ownership epoch alone:
// queued, so there is no execution lease to name, and before the
// ownership's start deadline (after it, the owner may already be fenced).
// An active item's owner names its lease (leased).
func (t *txn) ownedQueued(workItemID string, epoch uint64) (*WorkItem, error) {
	if err := t.requireAgent(); err != nil {
		return nil, err
	}
	w, err := t.existing(workItemID)
	if err != nil {
		return nil, err
	}
	if err := w.CheckOwnership(t.in.Actor.ID, epoch); err != nil {
		return nil, err
	}
	if w.State == protocol.WorkActive {
		return nil, protocol.InvalidCommand("work.fail: the owner of an active WorkItem names its leaseId").At("/payload/leaseId")
	}
	if err := t.inState(w, protocol.WorkQueued); err != nil {
		return nil, err
	}
	if !before(t.now, w.Ownership.StartDeadline) {
		return nil, protocol.WithDetails(protocol.Errorf(protocol.CodeWorkLeaseExpired, "ownership of epoch %d had to start by %s", w.Ownership.OwnershipEpoch, w.Ownership.StartDeadline),
			"startDeadline", w.Ownership.StartDeadline.String())
	}
	return w, nil
}

func checkpointFields(id, digest string) error {
	if id == "" || digest == "" {
		return protocol.InvalidCommand("checkpointId and stateDigest are required").At("/payload/checkpointId")
	}
	return nil
}

// checkpoint: active → queued. Durable progress releases the execution
// lease and keeps a bounded ownership lease (spec 11.3).
func (t *txn) checkpoint() error {
	p, err := payloadAs[protocol.CheckpointWorkPayload](t.in)
	if err != nil {
		return err
	}
	w, err := t.leased(p.WorkItemID, p.OwnershipEpoch, p.LeaseID)
	if err != nil {
		return err
	}
	if err := checkpointFields(p.CheckpointID, p.StateDigest); err != nil {
		return err
	}
	switch p.Reason {
	case protocol.CheckpointSafePoint, protocol.CheckpointPreempted, protocol.CheckpointYield:
	default:
		return protocol.Errorf(protocol.CodeSchemaValidationFailed, "unknown checkpoint reason %q", p.Reason).At("/payload/reason")
	}
	w.Checkpoint = &protocol.CheckpointRef{CheckpointID: p.CheckpointID, StateDigest: p.StateDigest, At: protocol.NewTime(t.now)}
	w.Lease = nil
	w.Ownership.StartDeadline = protocol.NewTime(t.now.Add(t.lim.StartWithin))
	w.State = protocol.WorkQueued
	k, prog := *w.Checkpoint, p.Progress
	t.emitWork(protocol.EvtWorkCheckpointed, w, &Checkpointed{
		LeaseID: p.LeaseID, Checkpoint: &k, CheckpointReason: p.Reason, Progress: &prog, Ownership: copyGrant(w.Ownership),
	})
	return nil
}

// block: active → blocked with a checkpoint and the required resolution;
// ownership is kept for a bounded blocked lease (spec 11.4).
func (t *txn) block() error {
	p, err := payloadAs[protocol.BlockWorkPayload](t.in)
	if err != nil {
		return err
	}
	w, err := t.leased(p.WorkItemID, p.OwnershipEpoch, p.LeaseID)
	if err != nil {
		return err
	}
	if err := checkpointFields(p.CheckpointID, p.StateDigest); err != nil {
		return err
	}
	switch p.Resolution.Kind {
	case protocol.ResolutionClarification, protocol.ResolutionDependency, protocol.ResolutionApproval,
		protocol.ResolutionResource, protocol.ResolutionSubwork, protocol.ResolutionOther:
	default:
		return protocol.Errorf(protocol.CodeSchemaValidationFailed, "unknown resolution kind %q", p.Resolution.Kind).At("/payload/resolution/kind")
	}
	if p.Resolution.Detail == "" {
		return protocol.InvalidCommand("work.block: the required resolution needs a detail").At("/payload/resolution/detail")
	}
	w.Checkpoint = &protocol.CheckpointRef{CheckpointID: p.CheckpointID, StateDigest: p.StateDigest, At: protocol.NewTime(t.now)}
	w.Lease = nil
	until := protocol.NewTime(t.now.Add(t.lim.BlockedHold))
	w.BlockedUntil = &until
	r := p.Resolution
	w.Blocker = &r
	w.State = protocol.WorkBlocked
	k, b := *w.Checkpoint, r
	t.emitWork(protocol.EvtWorkBlocked, w, &Blocked{
		LeaseID: p.LeaseID, Checkpoint: &k, Blocker: &b, Progress: p.Progress, Ownership: copyGrant(w.Ownership), BlockedUntil: &until,
	})
	return nil
}

// unblock: blocked → queued while the owner's blocked lease holds, else →
// open with the expired ownership fenced. A blocker owned by a linked child
// Mission is resolved only by that child's outcome.
func (t *txn) unblock() error {
	p, w, err := guarded(t, func(p *protocol.UnblockWorkPayload) string { return p.WorkItemID })
	if err != nil {
		return err
	}
	if w.ChildMissionID != "" {
		return protocol.WithDetails(protocol.InvalidTransition("WorkItem %s waits for child Mission %s", w.WorkItemID, w.ChildMissionID),
			"childMissionId", w.ChildMissionID)
	}
	if p.Resolution == "" {
		return protocol.InvalidCommand("work.unblock: resolution is required").At("/payload/resolution")
	}
	ev := &Unblocked{Resolution: p.Resolution}
	if w.OwnerActive(t.now) {
		w.State = protocol.WorkQueued
		w.BlockedUntil = nil
		w.Ownership.StartDeadline = protocol.NewTime(t.now.Add(t.lim.StartWithin))
		ev.Ownership = copyGrant(w.Ownership)
	} else {
		ev.FencedOwnershipEpoch = w.fenceExpiredOwner(t.now)
		w.State = protocol.WorkOpen
	}
	w.Blocker = nil
	t.emitWork(protocol.EvtWorkUnblocked, w, ev)
	return nil
}

// submit: active → submitted with artifacts and Evidence for every
// acceptance criterion. A fenced submission is kept for audit (spec 11.5)
// and never completes the WorkItem.
func (t *txn) submit() error {
	p, err := payloadAs[protocol.SubmitWorkPayload](t.in)
	if err != nil {
		return err
	}
	w, err := t.leased(p.WorkItemID, p.OwnershipEpoch, p.LeaseID)
	if err != nil {
		if c := protocol.CodeOf(err); c == protocol.CodeWorkStaleOwnership || c == protocol.CodeWorkLeaseExpired {
			t.audit = append(t.audit, LateResult{
				WorkItemID: p.WorkItemID, Actor: t.in.Actor, ActionID: t.in.ActionID,
				OwnershipEpoch: p.OwnershipEpoch, LeaseID: p.LeaseID, Code: c, ReceivedAt: t.now, Submission: *p,
			})
		}
		return err
	}
	if len(p.Artifacts) == 0 {
		return protocol.InvalidCommand("work.submit: artifacts are required").At("/payload/artifacts")
	}
	if err := checkEvidenceCoverage(&w.Contract, p.Evidence); err != nil {
		return err
	}
	w.Lease = nil
	w.State = protocol.WorkSubmitted
	t.emitWork(protocol.EvtWorkSubmitted, w, &Submitted{
		LeaseID: p.LeaseID, Ownership: copyGrant(w.Ownership), Artifacts: append([]string(nil), p.Artifacts...),
		Evidence: append([]protocol.Evidence(nil), p.Evidence...), Progress: p.Progress,
	})
	return nil
}

// acceptResult: submitted → verified, the coordinator's successful review
// under its current epoch.
func (t *txn) acceptResult() error {
	p, w, err := guarded(t, func(p *protocol.AcceptResultPayload) string { return p.WorkItemID })
	if err != nil {
		return err
	}
	if p.ContractRevision != w.Contract.Revision {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "contract is at revision %d, review names %d", w.Contract.Revision, p.ContractRevision),
			"contractRevision", w.Contract.Revision)
	}
	w.State = protocol.WorkVerified
	t.emitWork(protocol.EvtWorkResultAccepted, w, &ResultAccepted{
		ContractRevision: p.ContractRevision, Evidence: append([]protocol.Evidence(nil), p.ReviewEvidence...), Comment: p.Comment,
	})
	return nil
}

// fail: open … submitted → failed with failure Evidence, reported by the
// lease holder, by the owner of a queued item that has no lease to name
// (it releases an ownership it can no longer honour, e.g. a revised
// contract its admission control refuses, spec 10.1), or decided by the
// coordinator. Control returns to the coordinator, who may offer again.
func (t *txn) fail() error {
	p, err := payloadAs[protocol.FailWorkPayload](t.in)
	if err != nil {
		return err
	}
	var w *WorkItem
	switch {
	case p.OwnershipEpoch == nil && p.LeaseID != "":
		return protocol.InvalidCommand("work.fail: a worker names its ownershipEpoch").At("/payload/ownershipEpoch")
	case p.OwnershipEpoch != nil && p.LeaseID != "":
		w, err = t.leased(p.WorkItemID, *p.OwnershipEpoch, p.LeaseID)
	case p.OwnershipEpoch != nil:
		w, err = t.ownedQueued(p.WorkItemID, *p.OwnershipEpoch)
	default:
		if err = t.requireCoordinatorOrService(); err == nil {
			w, err = t.existing(p.WorkItemID)
		}
		if err == nil {
			err = t.allowedFrom(w)
		}
	}
	if err != nil {
		return err
	}
	if p.Reason == "" {
		return protocol.InvalidCommand("work.fail: reason is required").At("/payload/reason")
	}
	if !hasFailureEvidence(p.Evidence) {
		return protocol.InvalidCommand("work.fail: evidence mapped to the %q criterion is required", protocol.CriterionFailure).At("/payload/evidence")
	}
	ev := &Failed{Reason: p.Reason, Evidence: append([]protocol.Evidence(nil), p.Evidence...), LeaseID: p.LeaseID}
	if w.Ownership != nil {
		ev.Ownership = copyGrant(w.Ownership)
	}
	releaseAll(w)
	w.State = protocol.WorkFailed
	t.emitWork(protocol.EvtWorkFailed, w, ev)
	return nil
}

// cancel: open … submitted → cancelled, by the coordinator or the
// MissionOwner; every grant is revoked.
func (t *txn) cancel() error {
	p, w, err := guarded(t, func(p *protocol.CancelWorkPayload) string { return p.WorkItemID })
	if err != nil {
		return err
	}
	if p.Reason == "" {
		return protocol.InvalidCommand("work.cancel: reason is required").At("/payload/reason")
	}
	releaseAll(w)
	w.State = protocol.WorkCancelled
	t.emitWork(protocol.EvtWorkCancelled, w, &Cancelled{Reason: p.Reason})
	return nil
}

// renewLease extends the current execution lease (same leaseId) and records
// the renewal; the fact is work.progressed (spec 15.2).
func (t *txn) renewLease() error {
	p, err := payloadAs[protocol.RenewLeasePayload](t.in)
	if err != nil {
		return err
	}
	w, err := t.leased(p.WorkItemID, p.OwnershipEpoch, p.LeaseID)
	if err != nil {
		return err
	}
	l := copyLease(w.Lease)
	l.Renewals = append(l.Renewals, protocol.NewTime(t.now))
	l.ExpiresAt = protocol.NewTime(t.now.Add(t.lim.LeaseDuration))
	w.Lease = l
	prog := p.Progress
	t.emitWork(protocol.EvtWorkProgressed, w, &Progressed{LeaseID: l.LeaseID, Lease: copyLease(l), Progress: &prog})
	return nil
}

// childOutcome applies the two linked-child rows of spec 10.2.
func (t *txn) childOutcome(o ChildOutcome) error {
	if t.mission == nil {
		return protocol.InvalidTransition("Group %s has no Mission", t.g.GroupID)
	}
	if t.peek(o.ParentWorkItemID) == nil {
		return protocol.InvalidCommand("unknown parent WorkItem %s", o.ParentWorkItemID)
	}
	w := t.item(o.ParentWorkItemID)
	if w.State != protocol.WorkBlocked || w.ChildMissionID != o.ChildMissionID {
		return protocol.WithDetails(protocol.InvalidTransition("WorkItem %s does not wait for child Mission %s", w.WorkItemID, o.ChildMissionID),
			"state", string(w.State))
	}
	switch o.State {
	case protocol.MissionApproved:
		// The child's approval becomes the parent WorkItem's Evidence.
		ids := make(protocol.List[string], len(w.Contract.AcceptanceCriteria))
		for i, a := range w.Contract.AcceptanceCriteria {
			ids[i] = a.ID
		}
		ev := protocol.Evidence{
			Subject: o.ChildMissionID, Criteria: ids, Method: "child-mission-approval", Result: protocol.EvidencePass,
			Producer: AuthorityActor, Timestamp: protocol.NewTime(t.now), Artifacts: protocol.List[string]{},
		}
		w.State = protocol.WorkVerified
		w.Blocker = nil
		t.emitWork(protocol.EvtWorkResultAccepted, w, &ResultAccepted{
			ContractRevision: w.Contract.Revision, ChildMissionID: o.ChildMissionID, ChildApprovalID: o.ApprovalID,
			Evidence: []protocol.Evidence{ev},
		})
	case protocol.MissionCancelled, protocol.MissionTerminated:
		reason := "child Mission " + o.ChildMissionID + " " + string(o.State)
		if o.Reason != "" {
			reason += ": " + o.Reason
		}
		if w.ChildFailure == protocol.ChildFailureFail {
			releaseAll(w)
			w.State = protocol.WorkFailed
			t.emitWork(protocol.EvtWorkFailed, w, &Failed{
				Reason: reason, ChildMissionID: o.ChildMissionID,
				Evidence: []protocol.Evidence{t.failureEvidence(o.ChildMissionID, "child-mission-failure")},
			})
			return nil
		}
		// Policy block: the item stays blocked for the coordinator, and the
		// ownership the child protected becomes bounded again.
		w.ChildMissionID, w.ChildGroupID = "", ""
		w.Blocker = &protocol.Resolution{Kind: protocol.ResolutionSubwork, Detail: reason}
		if w.Ownership != nil {
			until := protocol.NewTime(t.now.Add(t.lim.BlockedHold))
			w.BlockedUntil = &until
		}
		b := *w.Blocker
		t.emitWork(protocol.EvtWorkBlocked, w, &Blocked{Blocker: &b, ChildMissionID: o.ChildMissionID, Reason: reason, Ownership: copyGrant(w.Ownership), BlockedUntil: w.BlockedUntil})
	default:
		return protocol.InvalidCommand("child Mission %s is %s, not terminal", o.ChildMissionID, o.State)
	}
	return nil
}
