package group

import (
	"slices"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// The WorkItem state machine of spec 10.2: proposal, authorization, offers
// and ownership, the execution gate and start. The execution half
// (checkpoint … cancel, lease renewal, child outcomes) is in execution.go.

func (t *txn) workCommand() error {
	if t.mission == nil {
		return protocol.InvalidTransition("%s: Group %s has no Mission", t.in.Type, t.g.GroupID)
	}
	if t.mission.State != protocol.MissionActive {
		return protocol.WithDetails(protocol.InvalidTransition("%s: Mission %s is %s", t.in.Type, t.mission.MissionID, t.mission.State),
			"missionState", string(t.mission.State))
	}
	switch t.in.Type {
	case protocol.CmdWorkPropose:
		return t.propose()
	case protocol.CmdWorkAuthorize:
		return t.authorize()
	case protocol.CmdWorkOffer:
		return t.offer()
	case protocol.CmdWorkAcceptOffer:
		return t.acceptOffer()
	case protocol.CmdApprovalGrantExecution:
		return t.grantExecution()
	case protocol.CmdWorkStart:
		return t.start()
	case protocol.CmdDependencyInsert:
		return t.insertDependency()
	case protocol.CmdWorkCheckpoint:
		return t.checkpoint()
	case protocol.CmdWorkBlock:
		return t.block()
	case protocol.CmdWorkUnblock:
		return t.unblock()
	case protocol.CmdWorkSubmit:
		return t.submit()
	case protocol.CmdWorkAcceptResult:
		return t.acceptResult()
	case protocol.CmdWorkFail:
		return t.fail()
	case protocol.CmdWorkCancel:
		return t.cancel()
	case protocol.CmdLeaseRenew:
		return t.renewLease()
	}
	return protocol.InvalidCommand("%s is not a WorkItem command", t.in.Type)
}

// existing returns the working copy of WorkItem id after the expected
// revision check.
func (t *txn) existing(id string) (*WorkItem, error) {
	if t.peek(id) == nil {
		return nil, protocol.InvalidCommand("%s: unknown WorkItem %q", t.in.Type, id).At("/payload/workItemId")
	}
	w := t.item(id)
	if err := t.checkRevision(protocol.AggregateWorkItem, id, w.Revision); err != nil {
		return nil, err
	}
	return w, nil
}

// guarded decodes a WorkItem command's payload and applies the rules
// table's guards (protocol.Commands) in the order every such command
// checks them: who sent it, that the WorkItem exists at the expected
// revision, that its state allows the command.
func guarded[P any](t *txn, id func(*P) string) (*P, *WorkItem, error) {
	p, err := payloadAs[P](t.in)
	if err != nil {
		return nil, nil, err
	}
	if err := t.requireSender(); err != nil {
		return nil, nil, err
	}
	w, err := t.existing(id(p))
	if err != nil {
		return nil, nil, err
	}
	if err := t.allowedFrom(w); err != nil {
		return nil, nil, err
	}
	return p, w, nil
}

// allowedFrom is the transition guard of the rules table: the states the
// command is allowed from.
func (t *txn) allowedFrom(w *WorkItem) error {
	return t.inState(w, protocol.Commands[t.in.Type].WorkFrom...)
}

// inState refuses a transition whose source state is not in from.
func (t *txn) inState(w *WorkItem, from ...protocol.WorkItemState) error {
	for _, s := range from {
		if w.State == s {
			return nil
		}
	}
	return protocol.WithDetails(protocol.InvalidTransition("%s is not allowed from WorkItem state %s", t.in.Type, w.State), "state", string(w.State))
}

func (t *txn) requireAgent() error {
	if t.in.Actor.Kind != protocol.ActorAgent {
		return protocol.Forbidden("%s is sent by a worker agent", t.in.Type)
	}
	return nil
}

// propose: none → open work proposal. Any member may propose; no WorkItem
// exists yet.
func (t *txn) propose() error {
	p, err := payloadAs[protocol.ProposeWorkPayload](t.in)
	if err != nil {
		return err
	}
	if p.MissionID != t.mission.MissionID {
		return protocol.InvalidCommand("work.propose: Mission %s is not in this Group", p.MissionID).At("/payload/missionId")
	}
	if p.ProposalID == "" {
		return protocol.InvalidCommand("work.propose: proposalId is required").At("/payload/proposalId")
	}
	if t.g.Proposals[p.ProposalID] != nil || t.peek(p.ProposalID) != nil {
		return protocol.InvalidTransition("work.propose: %s already exists", p.ProposalID)
	}
	if p.ParentWorkItemID != "" && t.peek(p.ParentWorkItemID) == nil {
		return protocol.InvalidCommand("work.propose: unknown parent WorkItem %s", p.ParentWorkItemID).At("/payload/parentWorkItemId")
	}
	if err := t.checkRevision(protocol.AggregateWorkItem, p.ProposalID, 0); err != nil {
		return err
	}
	pr := &Proposal{
		ProposalID: p.ProposalID, MissionID: p.MissionID, Summary: p.Summary, Proposer: t.in.Actor,
		ParentWorkItemID: p.ParentWorkItemID, State: protocol.WorkProposed, Revision: 1,
	}
	t.proposals[pr.ProposalID] = pr
	t.out.Events = append(t.out.Events, EventDraft{
		Type:      protocol.EvtWorkProposed,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: pr.ProposalID},
		Revision:  pr.Revision,
		Actor:     t.in.Actor,
		Payload: &Proposed{
			ProposalID: pr.ProposalID, MissionID: pr.MissionID, Summary: pr.Summary,
			Proposer: pr.Proposer, ParentWorkItemID: pr.ParentWorkItemID, State: pr.State,
		},
	})
	return nil
}

// authorize: none or open proposal → open, by the coordinator (or its scope
// delegate) with a complete contract.
func (t *txn) authorize() error {
	p, err := payloadAs[protocol.AuthorizeWorkPayload](t.in)
	if err != nil {
		return err
	}
	if err := t.requireSender(); err != nil {
		return err
	}
	if p.MissionID != t.mission.MissionID {
		return protocol.InvalidCommand("work.authorize: Mission %s is not in this Group", p.MissionID).At("/payload/missionId")
	}
	if p.WorkItemID == "" {
		return protocol.InvalidCommand("work.authorize: workItemId is required").At("/payload/workItemId")
	}
	if w := t.peek(p.WorkItemID); w != nil {
		return protocol.WithDetails(protocol.InvalidTransition("work.authorize: WorkItem %s already exists", p.WorkItemID), "state", string(w.State))
	}
	var rev uint64
	var pr *Proposal
	if p.ProposalID != "" {
		old := t.g.Proposals[p.ProposalID]
		if old == nil {
			return protocol.InvalidCommand("work.authorize: unknown proposal %s", p.ProposalID).At("/payload/proposalId")
		}
		if old.State != protocol.WorkProposed {
			return protocol.InvalidTransition("work.authorize: proposal %s was already authorized as %s", p.ProposalID, old.AuthorizedAs)
		}
		c := *old
		pr = &c
	}
	if other := t.g.Proposals[p.WorkItemID]; other != nil {
		if pr == nil || other.ProposalID != pr.ProposalID {
			return protocol.InvalidCommand("work.authorize: %s names another proposal", p.WorkItemID).At("/payload/workItemId")
		}
		// The proposal becomes the WorkItem: one aggregate, one revision line.
		rev = other.Revision
	}
	if err := t.checkRevision(protocol.AggregateWorkItem, p.WorkItemID, rev); err != nil {
		return err
	}
	if err := CheckContract(&p.Contract); err != nil {
		return err
	}
	if err := t.checkDependencies(p.WorkItemID, p.Contract.Dependencies); err != nil {
		return err
	}
	now := protocol.NewTime(t.now)
	w := &WorkItem{WorkItem: protocol.WorkItem{
		WorkItemID: p.WorkItemID, MissionID: p.MissionID, GroupID: t.g.GroupID, State: protocol.WorkOpen,
		Contract: p.Contract, Revision: rev, CreatedAt: now, UpdatedAt: now,
	}}
	t.items[w.WorkItemID] = w
	if pr != nil {
		pr.State, pr.AuthorizedAs = protocol.WorkOpen, w.WorkItemID
		t.proposals[pr.ProposalID] = pr
	}
	c := p.Contract
	t.emitWork(protocol.EvtWorkAuthorized, w, &Authorized{MissionID: p.MissionID, ProposalID: p.ProposalID, Contract: &c, ContractRevision: c.Revision})
	return nil
}

// offer: open, offered, queued, active, blocked or failed without an active
// owner → offered. An expired owner is fenced first; the offer reserves no
// ownership (spec 10.3).
func (t *txn) offer() error {
	p, w, err := guarded(t, func(p *protocol.OfferWorkPayload) string { return p.WorkItemID })
	if err != nil {
		return err
	}
	if w.OwnerActive(t.now) {
		e := protocol.InvalidTransition("work.offer: WorkItem %s has an active owner", w.WorkItemID)
		if w.Ownership != nil {
			protocol.WithDetails(e, "ownershipEpoch", w.Ownership.OwnershipEpoch)
		}
		return protocol.WithDetails(e, "reason", "active_owner")
	}
	if err := t.checkCandidates(p); err != nil {
		return err
	}
	var startWithin uint64
	if p.StartWithinMs != nil {
		if _, err := durationMs(*p.StartWithinMs, "/payload/startWithinMs"); err != nil {
			return err
		}
		startWithin = *p.StartWithinMs
	}
	revised, err := t.checkOfferedContract(w, &p.Contract)
	if err != nil {
		return err
	}

	fenced := w.fenceExpiredOwner(t.now)
	if revised {
		prev := w.Contract.Revision
		w.Contract = p.Contract
		c := p.Contract
		t.emitWork(protocol.EvtWorkContractRevised, w, &ContractRevised{Contract: &c, ContractRevision: c.Revision, PreviousRevision: prev})
	} else {
		w.Contract = p.Contract
	}
	ids := make(protocol.List[string], len(p.Candidates))
	for i, c := range p.Candidates {
		ids[i] = c.AgentID
	}
	w.State = protocol.WorkOffered
	w.Offer = &protocol.Offer{OfferID: p.OfferID, Candidates: ids, ExpiresAt: p.ExpiresAt}
	w.StartWithinMs = startWithin
	w.Lease = nil
	c := w.Contract
	exp := p.ExpiresAt
	var ckpt *protocol.CheckpointRef
	if w.Checkpoint != nil {
		k := *w.Checkpoint
		ckpt = &k
	}
	t.emitWork(protocol.EvtWorkOfferCreated, w, &OfferCreated{
		OfferID: p.OfferID, Contract: &c, ContractRevision: c.Revision,
		Candidates: append([]protocol.OfferCandidate(nil), p.Candidates...), OfferExpiresAt: &exp,
		StartWithinMs: startWithin, FencedOwnershipEpoch: fenced, Checkpoint: ckpt,
	})
	return nil
}

// checkCandidates bounds the candidate set and requires a live expiry.
func (t *txn) checkCandidates(p *protocol.OfferWorkPayload) error {
	if p.OfferID == "" {
		return protocol.InvalidCommand("work.offer: offerId is required").At("/payload/offerId")
	}
	n := len(p.Candidates)
	if n == 0 || n > t.lim.MaxCandidates {
		return protocol.WithDetails(protocol.InvalidCommand("work.offer: %d candidates; the bound is 1 … %d", n, t.lim.MaxCandidates).At("/payload/candidates"),
			"maxCandidates", t.lim.MaxCandidates)
	}
	seen := map[string]bool{}
	for i, c := range p.Candidates {
		if c.AgentID == "" || seen[c.AgentID] {
			return protocol.InvalidCommand("work.offer: candidate %q is empty or repeated", c.AgentID).At("/payload/candidates/" + strconv.Itoa(i))
		}
		seen[c.AgentID] = true
	}
	if !before(t.now, p.ExpiresAt) {
		return protocol.InvalidCommand("work.offer: expiresAt %s is not in the future", p.ExpiresAt).At("/payload/expiresAt")
	}
	return nil
}

// checkOfferedContract validates the contract an offer carries: complete,
// same contract id, and a substantial change must increment the revision by
// exactly one (spec 10.1). It reports whether the contract was revised.
func (t *txn) checkOfferedContract(w *WorkItem, c *protocol.WorkContract) (bool, error) {
	if err := CheckContract(c); err != nil {
		return false, err
	}
	cur := &w.Contract
	if c.ContractID != cur.ContractID {
		return false, protocol.InvalidCommand("work.offer: contract %s is not %s; authorize a replacement WorkItem instead", c.ContractID, cur.ContractID).At("/payload/contract/contractId")
	}
	if !substantiallyDifferent(cur, c) {
		if c.Revision != cur.Revision {
			return false, protocol.WithDetails(protocol.InvalidCommand("work.offer: an unchanged contract keeps revision %d", cur.Revision).At("/payload/contract/revision"),
				"contractRevision", cur.Revision)
		}
		return false, nil
	}
	if c.Revision != cur.Revision+1 {
		return false, protocol.WithDetails(protocol.InvalidCommand("work.offer: a substantially revised contract must have revision %d", cur.Revision+1).At("/payload/contract/revision"),
			"contractRevision", cur.Revision)
	}
	if err := t.checkDependencies(w.WorkItemID, c.Dependencies); err != nil {
		return false, err
	}
	return true, nil
}

// acceptOffer: offered → queued. The first valid acceptance atomically wins
// a new ownership epoch; later ones are WORK_ALREADY_OWNED. The current owner
// may also renew its acceptance after a contract revision.
func (t *txn) acceptOffer() error {
	p, err := payloadAs[protocol.AcceptOfferPayload](t.in)
	if err != nil {
		return err
	}
	if err := t.requireSender(); err != nil {
		return err
	}
	w, err := t.existing(p.WorkItemID)
	if err != nil {
		return err
	}
	agent := t.in.Actor.ID
	if w.State != protocol.WorkOffered {
		if w.Ownership != nil && p.OfferID == w.WonOfferID {
			if agent == w.Ownership.OwnerAgentID && w.AcceptedRevision < w.Contract.Revision &&
				(w.State == protocol.WorkQueued || w.State == protocol.WorkBlocked) {
				return t.renewAcceptance(w, p)
			}
			return protocol.Errorf(protocol.CodeWorkAlreadyOwned, "WorkItem %s is already owned", w.WorkItemID)
		}
		return t.inState(w, protocol.WorkOffered)
	}
	o := w.Offer
	if o == nil {
		return protocol.InvalidTransition("WorkItem %s is offered without a standing offer", w.WorkItemID)
	}
	if p.OfferID != o.OfferID {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeWorkOfferExpired, "offer %s was withdrawn or replaced", p.OfferID), "offerId", o.OfferID)
	}
	if !slices.Contains(o.Candidates, agent) {
		return protocol.Forbidden("%s is not a candidate of offer %s", agent, o.OfferID)
	}
	if !before(t.now, o.ExpiresAt) {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeWorkOfferExpired, "offer %s expired at %s", o.OfferID, o.ExpiresAt), "expiresAt", o.ExpiresAt.String())
	}
	if p.ContractRevision != w.Contract.Revision {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "contract is at revision %d, acceptance names %d", w.Contract.Revision, p.ContractRevision),
			"contractRevision", w.Contract.Revision)
	}
	within := t.lim.StartWithin
	if w.StartWithinMs > 0 {
		within, _ = durationMs(w.StartWithinMs, "")
	}
	w.LastOwnershipEpoch++
	w.Ownership = &protocol.OwnershipGrant{
		WorkItemID: w.WorkItemID, OwnerAgentID: agent, OwnershipEpoch: w.LastOwnershipEpoch,
		StartDeadline: protocol.NewTime(t.now.Add(within)),
	}
	w.AcceptedRevision = p.ContractRevision
	w.WonOfferID = o.OfferID
	w.Offer = nil
	w.Attempts++
	w.State = protocol.WorkQueued
	sd := p.ScheduleDisclosure
	t.emitWork(protocol.EvtWorkOfferAccepted, w, &OfferAccepted{
		OfferID: o.OfferID, ContractRevision: p.ContractRevision, Ownership: copyGrant(w.Ownership), ScheduleDisclosure: &sd,
	})
	return nil
}

func (t *txn) renewAcceptance(w *WorkItem, p *protocol.AcceptOfferPayload) error {
	if p.ContractRevision != w.Contract.Revision {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "contract is at revision %d, acceptance names %d", w.Contract.Revision, p.ContractRevision),
			"contractRevision", w.Contract.Revision)
	}
	w.AcceptedRevision = p.ContractRevision
	sd := p.ScheduleDisclosure
	t.emitWork(protocol.EvtWorkOfferAccepted, w, &OfferAccepted{
		OfferID: p.OfferID, ContractRevision: p.ContractRevision, Ownership: copyGrant(w.Ownership),
		ScheduleDisclosure: &sd, RenewedAcceptance: true,
	})
	return nil
}

// grantExecution: queued → queued, satisfying the pre-execution approval
// gate for the current contract revision. Approval comes from a human or
// Organization policy, never from an agent.
func (t *txn) grantExecution() error {
	p, err := payloadAs[protocol.GrantExecutionPayload](t.in)
	if err != nil {
		return err
	}
	if t.in.Actor.Kind == protocol.ActorAgent {
		return protocol.Forbidden("approval.grant_execution is given by a human or Organization policy")
	}
	w, err := t.existing(p.WorkItemID)
	if err != nil {
		return err
	}
	if err := t.allowedFrom(w); err != nil {
		return err
	}
	if p.ApprovalID == "" {
		return protocol.InvalidCommand("approval.grant_execution: approvalId is required").At("/payload/approvalId")
	}
	if p.ContractRevision != w.Contract.Revision {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "contract is at revision %d, approval names %d", w.Contract.Revision, p.ContractRevision),
			"contractRevision", w.Contract.Revision)
	}
	if p.ExpiresAt != nil && !before(t.now, *p.ExpiresAt) {
		return protocol.InvalidCommand("approval.grant_execution: expiresAt is not in the future").At("/payload/expiresAt")
	}
	a := &protocol.Approval{
		ApprovalID: p.ApprovalID, Kind: protocol.ApprovalExecution, MissionID: w.MissionID, GroupID: t.g.GroupID,
		WorkItemID: w.WorkItemID, ContractRevision: protocol.Uint64(p.ContractRevision), Approver: t.in.Actor,
		Decision: protocol.DecisionApproved, Comment: p.Comment, DecidedAt: protocol.NewTime(t.now), ExpiresAt: p.ExpiresAt,
	}
	w.ExecutionApproval = a
	c := *a
	t.emitWork(protocol.EvtApprovalExecutionGranted, w, &ExecutionGranted{Approval: &c})
	return nil
}

// approved reports whether the execution gate is satisfied for the current
// contract revision at now.
func (w *WorkItem) approved(t *txn) bool {
	a := w.ExecutionApproval
	return a != nil && a.ContractRevision != nil && *a.ContractRevision == w.Contract.Revision &&
		(a.ExpiresAt == nil || before(t.now, *a.ExpiresAt))
}

// start: queued → active with valid ownership, the renewed acceptance of
// the current contract, the approval gate when the contract asks for it and
// satisfied dependencies; yields an execution lease.
func (t *txn) start() error {
	p, err := payloadAs[protocol.StartWorkPayload](t.in)
	if err != nil {
		return err
	}
	if err := t.requireSender(); err != nil {
		return err
	}
	w, err := t.existing(p.WorkItemID)
	if err != nil {
		return err
	}
	if err := w.CheckOwnership(t.in.Actor.ID, p.OwnershipEpoch); err != nil {
		return err
	}
	if err := t.allowedFrom(w); err != nil {
		return err
	}
	if !before(t.now, w.Ownership.StartDeadline) {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeWorkLeaseExpired, "ownership of epoch %d had to start by %s", w.Ownership.OwnershipEpoch, w.Ownership.StartDeadline),
			"startDeadline", w.Ownership.StartDeadline.String())
	}
	if w.AcceptedRevision != w.Contract.Revision {
		return protocol.WithDetails(protocol.InvalidTransition("work.start: contract revision %d needs a renewed acceptance", w.Contract.Revision),
			"reason", "renewed_acceptance_required", "contractRevision", w.Contract.Revision)
	}
	if w.Contract.Risk.PreExecutionApproval && !w.approved(t) {
		return protocol.Errorf(protocol.CodeApprovalRequired, "WorkItem %s needs approval.grant_execution for contract revision %d", w.WorkItemID, w.Contract.Revision)
	}
	if unmet := unmetDependencies(w, t.peek); len(unmet) > 0 {
		return protocol.WithDetails(protocol.InvalidTransition("work.start: %d dependencies do not meet their policy", len(unmet)),
			"reason", "dependencies", "unmetDependencies", unmet)
	}
	if p.ResumeFromCheckpointID != "" && (w.Checkpoint == nil || w.Checkpoint.CheckpointID != p.ResumeFromCheckpointID) {
		return protocol.InvalidCommand("work.start: %s is not the last checkpoint", p.ResumeFromCheckpointID).At("/payload/resumeFromCheckpointId")
	}
	if t.in.SessionEpoch == nil {
		return protocol.InvalidCommand("work.start: sessionEpoch is required").At("/sessionEpoch")
	}
	w.Lease = w.newLease(*t.in.SessionEpoch, t.now, t.lim.LeaseDuration)
	w.State = protocol.WorkActive
	t.emitWork(protocol.EvtWorkStarted, w, &Started{Lease: copyLease(w.Lease), Ownership: copyGrant(w.Ownership), ResumeFromCheckpoint: p.ResumeFromCheckpointID})
	return nil
}

// insertDependency adds dependencies to a WorkItem that has not started,
// refusing cycles; it is a substantial revision, so the current owner must
// renew its acceptance before starting.
func (t *txn) insertDependency() error {
	p, w, err := guarded(t, func(p *protocol.InsertDependencyPayload) string { return p.WorkItemID })
	if err != nil {
		return err
	}
	if p.ContractRevision != w.Contract.Revision+1 {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "contract is at revision %d; the revision must be %d", w.Contract.Revision, w.Contract.Revision+1),
			"contractRevision", w.Contract.Revision)
	}
	if len(p.Dependencies) == 0 {
		return protocol.InvalidCommand("dependency_insert: no dependencies").At("/payload/dependencies")
	}
	if err := t.checkDependencies(w.WorkItemID, p.Dependencies); err != nil {
		return err
	}
	deps := append(protocol.List[protocol.Dependency](nil), w.Contract.Dependencies...)
	for _, d := range p.Dependencies {
		replaced := false
		for i := range deps {
			if deps[i].WorkItemID == d.WorkItemID {
				deps[i].Policy, replaced = d.Policy, true
			}
		}
		if !replaced {
			deps = append(deps, d)
		}
	}
	prev := w.Contract.Revision
	c := w.Contract
	c.Dependencies = deps
	c.Revision = p.ContractRevision
	w.Contract = c
	cc := c
	t.emitWork(protocol.EvtWorkContractRevised, w, &ContractRevised{
		Contract: &cc, ContractRevision: c.Revision, PreviousRevision: prev,
		Dependencies: append([]protocol.Dependency(nil), p.Dependencies...),
	})
	return nil
}
