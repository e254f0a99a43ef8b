package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The Mission state machine of docs/design.md §11 (our stand-in for the missing
// spec 7.1). Every row names who may take it; anything else is
// INVALID_STATE_TRANSITION.

func (t *txn) missionCreate() error {
	p, err := payloadAs[protocol.CreateMissionPayload](t.in)
	if err != nil {
		return err
	}
	if t.in.Actor.Kind != protocol.ActorHuman {
		return protocol.Forbidden("mission.create: a Mission is created by a human, its MissionOwner")
	}
	if err := t.checkNewMission(p.MissionID, p.PriorityClass); err != nil {
		return err
	}
	t.mission = &protocol.Mission{
		MissionID: p.MissionID, GroupID: t.g.GroupID, Title: p.Title, Objective: p.Objective,
		State: protocol.MissionActive, Owner: t.in.Actor, PriorityClass: p.PriorityClass,
		Budgets: p.Budgets, CreatedAt: protocol.NewTime(t.now),
	}
	t.profiles = append([]protocol.ProfilePin(nil), p.ExtensionProfiles...)
	ev := &MissionCreated{Budgets: p.Budgets, ExtensionProfiles: p.ExtensionProfiles}
	t.emitMission(protocol.EvtMissionCreated, ev)
	ev.Mission = t.missionCopy()
	return nil
}

// missionCreateFollowUp creates, in the new Group, a Mission linked to a
// terminal one. The caller supplies the predecessor from its own Group.
func (t *txn) missionCreateFollowUp() error {
	p, err := payloadAs[protocol.CreateFollowUpPayload](t.in)
	if err != nil {
		return err
	}
	if t.in.Actor.Kind != protocol.ActorHuman {
		return protocol.Forbidden("mission.create_follow_up: a Mission is created by a human")
	}
	prev := t.in.Predecessor
	if prev == nil || prev.MissionID != p.FollowUpOf {
		return protocol.InvalidCommand("mission.create_follow_up: unknown Mission %q", p.FollowUpOf).At("/payload/followUpOf")
	}
	if !prev.State.Terminal() {
		return protocol.WithDetails(protocol.InvalidTransition("mission.create_follow_up: Mission %s is %s; a follow-up needs approved, cancelled or terminated", prev.MissionID, prev.State),
			"state", string(prev.State))
	}
	if err := t.checkNewMission(p.MissionID, p.PriorityClass); err != nil {
		return err
	}
	if p.MissionID == prev.MissionID {
		return protocol.InvalidCommand("mission.create_follow_up: a Mission cannot follow up itself").At("/payload/missionId")
	}
	t.mission = &protocol.Mission{
		MissionID: p.MissionID, GroupID: t.g.GroupID, Title: p.Title, Objective: p.Objective,
		State: protocol.MissionActive, Owner: t.in.Actor, PriorityClass: p.PriorityClass,
		Budgets: p.Budgets, FollowUpOf: prev.MissionID, CreatedAt: protocol.NewTime(t.now),
	}
	ev := &MissionCreated{Budgets: p.Budgets, FollowUpOf: prev.MissionID}
	t.emitMission(protocol.EvtMissionCreated, ev)
	ev.Mission = t.missionCopy()
	t.emitMission(protocol.EvtMissionFollowUpCreated, &FollowUpCreated{FollowUpOf: prev.MissionID})
	return nil
}

func (t *txn) checkNewMission(missionID string, pc protocol.PriorityClass) error {
	if t.mission != nil {
		return protocol.InvalidTransition("Group %s already has Mission %s", t.g.GroupID, t.mission.MissionID)
	}
	if t.in.GroupID != "" && t.in.GroupID != t.g.GroupID {
		return protocol.InvalidCommand("command names Group %s, not %s", t.in.GroupID, t.g.GroupID).At("/groupId")
	}
	if missionID == "" {
		return protocol.InvalidCommand("missionId is required").At("/payload/missionId")
	}
	if !pc.Known() {
		return protocol.Errorf(protocol.CodeSchemaValidationFailed, "unknown priorityClass %q", pc).At("/payload/priorityClass")
	}
	return t.checkRevision(protocol.AggregateMission, missionID, 0)
}

// CreateLinkedMission creates a child Mission in this (empty) Group, asked
// for by a ChildMissionRequested effect of the parent Group. The child keeps
// the root MissionOwner: a control plane never becomes one.
func (g *Group) CreateLinkedMission(link LinkedMission, now time.Time) (Outcome, error) {
	t := g.begin(Input{ActionID: link.CausationID, GroupID: link.GroupID, Actor: link.Actor}, now)
	if err := t.checkNewMission(link.MissionID, link.PriorityClass); err != nil {
		return Outcome{}, err
	}
	if link.Owner.Kind != protocol.ActorHuman {
		return Outcome{}, protocol.InvalidCommand("a Mission's owner is a human, not %s", link.Owner.Kind)
	}
	for _, a := range link.Ancestors {
		if a == link.MissionID {
			return Outcome{}, protocol.InvalidCommand("Mission %s would be its own ancestor", a)
		}
	}
	t.mission = &protocol.Mission{
		MissionID: link.MissionID, GroupID: g.GroupID, Title: link.Title, Objective: link.Objective,
		State: protocol.MissionActive, Owner: link.Owner, PriorityClass: link.PriorityClass,
		Budgets: link.Budgets, Parent: link.Parent, FollowUpOf: link.FollowUpOf,
		CreatedAt: protocol.NewTime(now),
	}
	t.ancestors = append([]string(nil), link.Ancestors...)
	ev := &MissionCreated{Budgets: link.Budgets, Parent: link.Parent, Ancestors: t.ancestors, FollowUpOf: link.FollowUpOf}
	t.emitMission(protocol.EvtMissionCreated, ev)
	ev.Mission = t.missionCopy()
	return t.apply()
}

func (t *txn) missionCopy() *protocol.Mission {
	m := *t.mission
	if m.Coordinator != nil {
		c := *m.Coordinator
		m.Coordinator = &c
	}
	return &m
}

func (t *txn) missionCommand() error {
	if t.mission == nil {
		return protocol.InvalidTransition("%s: Group %s has no Mission", t.in.Type, t.g.GroupID)
	}
	switch t.in.Type {
	case protocol.CmdMissionAssignCoordinator:
		return t.assignCoordinator()
	case protocol.CmdMissionRenewCoordinator:
		return t.renewCoordinator()
	case protocol.CmdMissionSubmitForApproval:
		return t.submitForApproval()
	case protocol.CmdMissionApprove:
		return t.approveMission()
	case protocol.CmdMissionRequestChanges:
		return t.requestChanges()
	case protocol.CmdMissionCancel:
		return t.cancelMission()
	case protocol.CmdMissionTerminate:
		return t.terminateMission()
	case protocol.CmdMissionCreateChild:
		return t.createChild()
	}
	return protocol.InvalidCommand("%s is not a Mission command", t.in.Type)
}

// missionPayload type-asserts the payload and checks that it names this
// Group's Mission.
func missionPayload[T any](t *txn, id func(*T) string) (*T, error) {
	p, err := payloadAs[T](t.in)
	if err != nil {
		return nil, err
	}
	if got := id(p); got != t.mission.MissionID {
		return nil, protocol.InvalidCommand("%s: Mission %q is not in Group %s", t.in.Type, got, t.g.GroupID).At("/payload/missionId")
	}
	return p, nil
}

// guardedMission is guarded for the Mission commands: the payload names
// this Group's Mission, then the sender, the expected revision and the
// source state of the rules table.
func guardedMission[P any](t *txn, id func(*P) string) (*P, error) {
	p, err := missionPayload(t, id)
	if err != nil {
		return nil, err
	}
	if err := t.requireSender(); err != nil {
		return nil, err
	}
	if err := t.missionStep(); err != nil {
		return nil, err
	}
	return p, nil
}

// missionStep checks revision and source states, in that order, after the
// caller checked authority.
func (t *txn) missionStep() error {
	if err := t.checkRevision(protocol.AggregateMission, t.mission.MissionID, t.mission.Revision); err != nil {
		return err
	}
	return t.missionFrom()
}

// missionFrom checks the Mission's state against the rules table's
// MissionFrom column.
func (t *txn) missionFrom() error {
	from := protocol.Commands[t.in.Type].MissionFrom
	for _, s := range from {
		if t.mission.State == s {
			return nil
		}
	}
	return protocol.WithDetails(protocol.InvalidTransition("%s is not allowed from Mission state %s", t.in.Type, t.mission.State),
		"state", string(t.mission.State))
}

func (t *txn) assignCoordinator() error {
	p, err := missionPayload(t, func(p *protocol.AssignCoordinatorPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	if t.in.Actor.Kind != protocol.ActorService {
		if err := t.requireOwner(); err != nil {
			return err
		}
	}
	if err := t.missionStep(); err != nil {
		return err
	}
	if p.AgentID == "" {
		return protocol.InvalidCommand("mission.assign_coordinator: agentId is required").At("/payload/agentId")
	}
	d, err := durationMs(p.LeaseDurationMs, "/payload/leaseDurationMs")
	if err != nil {
		return err
	}
	ev := &CoordinatorAssigned{}
	var epoch uint64 = 1
	if prev := t.mission.Coordinator; prev != nil {
		epoch = prev.CoordinatorEpoch + 1
		ev.PreviousCoordinatorEpoch = protocol.Uint64(prev.CoordinatorEpoch)
	}
	t.mission.Coordinator = &protocol.CoordinatorLease{
		AgentID: p.AgentID, CoordinatorEpoch: epoch, LeaseExpiresAt: protocol.NewTime(t.now.Add(d)),
	}
	c := *t.mission.Coordinator
	ev.Coordinator = &c
	t.emitMission(protocol.EvtMissionCoordinatorAssigned, ev)
	return nil
}

func (t *txn) renewCoordinator() error {
	p, err := guardedMission(t, func(p *protocol.RenewCoordinatorPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	d, err := durationMs(p.LeaseDurationMs, "/payload/leaseDurationMs")
	if err != nil {
		return err
	}
	t.mission.Coordinator.LeaseExpiresAt = protocol.NewTime(t.now.Add(d))
	c := *t.mission.Coordinator
	t.emitMission(protocol.EvtMissionCoordinatorRenewed, &CoordinatorRenewed{Coordinator: &c})
	return nil
}

func (t *txn) submitForApproval() error {
	p, err := guardedMission(t, func(p *protocol.SubmitForApprovalPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	var unverified []string
	for _, id := range t.itemIDs() {
		if s := t.peek(id).State; s != protocol.WorkVerified && s != protocol.WorkCancelled {
			unverified = append(unverified, id)
		}
	}
	if len(unverified) > 0 {
		return protocol.WithDetails(protocol.InvalidTransition("mission.submit_for_approval: %d WorkItem(s) are neither verified nor cancelled", len(unverified)),
			"unverified", unverified)
	}
	if len(p.Evidence) == 0 {
		return protocol.InvalidCommand("mission.submit_for_approval: evidence is required").At("/payload/evidence")
	}
	t.mission.State = protocol.MissionAwaitingApproval
	t.emitMission(protocol.EvtMissionSubmittedForApproval, &SubmittedForApproval{
		Summary: p.Summary, Artifacts: p.Artifacts, Evidence: p.Evidence,
	})
	return nil
}

func (t *txn) approveMission() error {
	p, err := guardedMission(t, func(p *protocol.ApproveMissionPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	if p.ApprovalID == "" {
		return protocol.InvalidCommand("mission.approve: approvalId is required").At("/payload/approvalId")
	}
	t.mission.State = protocol.MissionApproved
	approver := t.in.Actor
	t.emitMission(protocol.EvtMissionApproved, &MissionApproved{ApprovalID: p.ApprovalID, Approver: &approver, Comment: p.Comment})
	t.noticeParent(p.ApprovalID, "")
	return nil
}

func (t *txn) requestChanges() error {
	p, err := guardedMission(t, func(p *protocol.RequestChangesPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	if len(p.Changes) == 0 {
		return protocol.InvalidCommand("mission.request_changes: changes are required").At("/payload/changes")
	}
	t.mission.State = protocol.MissionActive
	t.emitMission(protocol.EvtMissionChangesRequested, &ChangesRequested{Changes: p.Changes, Comment: p.Comment})
	return nil
}

func (t *txn) cancelMission() error {
	p, err := guardedMission(t, func(p *protocol.CancelMissionPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	t.mission.State = protocol.MissionCancelled
	ev := &MissionClosed{Reason: p.Reason}
	t.emitMission(protocol.EvtMissionCancelled, ev)
	ev.UnfinishedWorkItems = t.closeUnfinished(protocol.WorkCancelled, "mission cancelled: "+p.Reason)
	t.noticeParent("", p.Reason)
	return nil
}

func (t *txn) terminateMission() error {
	p, err := missionPayload(t, func(p *protocol.TerminateMissionPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	switch t.in.Actor.Kind {
	case protocol.ActorService:
	case protocol.ActorAgent:
		if err := t.requireCoordinator(); err != nil {
			return err
		}
	default:
		return protocol.Forbidden("mission.terminate: the coordinator or Organization policy terminates; the MissionOwner cancels")
	}
	if err := t.missionStep(); err != nil {
		return err
	}
	t.mission.State = protocol.MissionTerminated
	ev := &MissionClosed{Reason: p.Reason}
	t.emitMission(protocol.EvtMissionTerminated, ev)
	ev.UnfinishedWorkItems = t.closeUnfinished(protocol.WorkFailed, "mission terminated: "+p.Reason)
	t.noticeParent("", p.Reason)
	return nil
}

// closeUnfinished propagates a terminal Mission to its unfinished WorkItems
// (the last row of spec 10.2) and returns their ids.
func (t *txn) closeUnfinished(to protocol.WorkItemState, reason string) []string {
	var ids []string
	for _, id := range t.itemIDs() {
		if !unfinished(t.peek(id).State) {
			continue
		}
		w := t.item(id)
		w.State = to
		releaseAll(w)
		if to == protocol.WorkFailed {
			t.emitWork(protocol.EvtWorkFailed, w, &Failed{Reason: reason, Evidence: []protocol.Evidence{t.failureEvidence(id, "mission-terminated")}})
		} else {
			t.emitWork(protocol.EvtWorkCancelled, w, &Cancelled{Reason: reason})
		}
		ids = append(ids, id)
	}
	return ids
}

func unfinished(s protocol.WorkItemState) bool {
	switch s {
	case protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive,
		protocol.WorkBlocked, protocol.WorkSubmitted:
		return true
	}
	return false
}

func (t *txn) failureEvidence(subject, method string) protocol.Evidence {
	return protocol.Evidence{
		Subject: subject, Criteria: protocol.List[string]{protocol.CriterionFailure}, Method: method,
		Result: protocol.EvidenceFail, Producer: t.in.Actor, Timestamp: protocol.NewTime(t.now),
	}
}

// noticeParent tells the parent Group a linked child Mission ended.
func (t *txn) noticeParent(approvalID, reason string) {
	link := t.mission.Parent
	if link == nil {
		return
	}
	t.effect(ParentNotice{ParentGroupID: link.GroupID, Outcome: ChildOutcome{
		ParentWorkItemID: link.WorkItemID, ChildMissionID: t.mission.MissionID, ChildGroupID: t.g.GroupID,
		State: t.mission.State, ApprovalID: approvalID, Reason: reason, CausationID: t.in.ActionID,
	}})
}

func (t *txn) createChild() error {
	p, err := guardedMission(t, func(p *protocol.CreateChildMissionPayload) string { return p.MissionID })
	if err != nil {
		return err
	}
	if p.OnChildFailure != protocol.ChildFailureBlock && p.OnChildFailure != protocol.ChildFailureFail {
		return protocol.Errorf(protocol.CodeSchemaValidationFailed, "unknown onChildFailure %q", p.OnChildFailure).At("/payload/onChildFailure")
	}
	if p.ChildMissionID == "" || p.ChildGroupID == "" {
		return protocol.InvalidCommand("mission.create_child: childMissionId and childGroupId are required")
	}
	if p.ChildGroupID == t.g.GroupID {
		return protocol.InvalidCommand("mission.create_child: a child Mission has its own Group").At("/payload/childGroupId")
	}
	ancestors := append(append([]string(nil), t.ancestors...), t.mission.MissionID)
	for _, a := range ancestors {
		if a == p.ChildMissionID {
			return protocol.InvalidCommand("mission.create_child: Mission %s is already an ancestor (cyclic ancestry)", a).At("/payload/childMissionId")
		}
	}
	w := t.item(p.ParentWorkItemID)
	if w == nil {
		return protocol.InvalidCommand("mission.create_child: unknown WorkItem %s", p.ParentWorkItemID).At("/payload/parentWorkItemId")
	}
	if err := t.childBlocks(w); err != nil {
		return err
	}
	w.State = protocol.WorkBlocked
	w.Offer = nil
	w.Lease = nil
	w.BlockedUntil = nil
	w.Blocker = &protocol.Resolution{Kind: protocol.ResolutionSubwork, Detail: "child Mission " + p.ChildMissionID}
	w.ChildMissionID, w.ChildGroupID, w.ChildFailure = p.ChildMissionID, p.ChildGroupID, p.OnChildFailure

	t.emitMission(protocol.EvtMissionChildCreated, &ChildCreated{Child: &ChildLink{
		ParentWorkItemID: p.ParentWorkItemID, ChildMissionID: p.ChildMissionID, ChildGroupID: p.ChildGroupID,
		Title: p.Title, Objective: p.Objective, OnChildFailure: p.OnChildFailure,
	}, Budgets: p.Budgets})
	b := *w.Blocker
	t.emitWork(protocol.EvtWorkBlocked, w, &Blocked{Blocker: &b, ChildMissionID: p.ChildMissionID, ChildGroupID: p.ChildGroupID, Ownership: copyGrant(w.Ownership)})
	t.effect(ChildMissionRequested{Link: LinkedMission{
		MissionID: p.ChildMissionID, GroupID: p.ChildGroupID, Title: p.Title, Objective: p.Objective,
		Owner: t.mission.Owner, PriorityClass: t.mission.PriorityClass, Budgets: p.Budgets,
		Parent: &protocol.ParentLink{
			MissionID: t.mission.MissionID, GroupID: t.g.GroupID, WorkItemID: p.ParentWorkItemID, OnChildFailure: p.OnChildFailure,
		},
		Ancestors: ancestors, Actor: t.in.Actor, CausationID: t.in.ActionID,
	}})
	return nil
}

// childBlocks checks the WorkItem side of mission.create_child: from open,
// offered, queued, active or blocked, one linked child at a time.
func (t *txn) childBlocks(w *WorkItem) error {
	if w.State == protocol.WorkBlocked && w.ChildMissionID != "" {
		return protocol.InvalidTransition("WorkItem %s already waits for child Mission %s", w.WorkItemID, w.ChildMissionID)
	}
	return t.allowedFrom(w)
}
