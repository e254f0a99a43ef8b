package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Group is the decision state of one Group: its Mission, WorkItems and open
// work proposals. It is pure: Apply takes an Input and the authority's time
// and returns the events to append; it never reads a clock, disk or network.
// One writer per Group owns a Group value (docs/design.md §8).
//
// Values reachable from a Group are copy-on-write: a contract, slice or
// pointed-to record is replaced, never edited in place, so a failed Apply
// leaves the Group exactly as it was.
type Group struct {
	GroupID string            `json:"groupId"`
	Mission *protocol.Mission `json:"mission,omitempty"`
	// Ancestors are the Mission ids from the root to this Mission's parent.
	Ancestors []string `json:"ancestors,omitempty"`
	// Profiles are the extension profile versions the Group pins (spec
	// 18), set at mission.create.
	Profiles  []protocol.ProfilePin `json:"extensionProfiles,omitempty"`
	Items     map[string]*WorkItem  `json:"workItems"`
	Proposals map[string]*Proposal  `json:"proposals"`
	// Contexts are the current versions of the Context Packages, by id.
	Contexts map[string]*ContextHead `json:"contextPackages,omitempty"`
	Limits   Limits                  `json:"-"`
}

// WorkItem is the authority's WorkItem record plus the bookkeeping that
// fencing needs and the wire record does not show.
type WorkItem struct {
	protocol.WorkItem
	// LastOwnershipEpoch is the highest ownership epoch ever granted; it
	// survives fencing so epochs strictly increase.
	LastOwnershipEpoch uint64 `json:"lastOwnershipEpoch"`
	// LeaseSeq counts execution leases issued, to derive fresh lease ids.
	LeaseSeq uint64 `json:"leaseSeq"`
	// AcceptedRevision is the contract revision the current owner accepted;
	// a substantial revision after that requires a renewed acceptance.
	AcceptedRevision uint64 `json:"acceptedRevision,omitempty"`
	// WonOfferID is the offer the current ownership was won on, so later
	// acceptances of it are told WORK_ALREADY_OWNED.
	WonOfferID    string `json:"wonOfferId,omitempty"`
	StartWithinMs uint64 `json:"startWithinMs,omitempty"`
	// BlockedUntil bounds ownership while blocked (spec 11.4); nil while a
	// linked child Mission protects it.
	BlockedUntil      *protocol.Time              `json:"blockedUntil,omitempty"`
	ExecutionApproval *protocol.Approval          `json:"executionApproval,omitempty"`
	ChildGroupID      string                      `json:"childGroupId,omitempty"`
	ChildFailure      protocol.ChildFailurePolicy `json:"childFailure,omitempty"`
}

// Proposal is an open work proposal: no WorkItem exists yet (spec 10.2).
type Proposal struct {
	ProposalID       string                 `json:"proposalId"`
	MissionID        string                 `json:"missionId"`
	Summary          string                 `json:"summary"`
	Proposer         protocol.Actor         `json:"proposer"`
	ParentWorkItemID string                 `json:"parentWorkItemId,omitempty"`
	State            protocol.WorkItemState `json:"state"`
	AuthorizedAs     string                 `json:"authorizedAs,omitempty"`
	Revision         uint64                 `json:"revision"`
}

// NewGroup returns the empty state of a Group before mission.create.
func NewGroup(groupID string, limits Limits) *Group {
	return &Group{
		GroupID:   groupID,
		Items:     map[string]*WorkItem{},
		Proposals: map[string]*Proposal{},
		Limits:    limits,
	}
}

// Apply decides one Command. On success the Group has moved to the new
// state and the Outcome lists the events to append atomically; on error
// (always a *protocol.Error) the Group is unchanged and the Outcome holds at
// most audit effects.
func (g *Group) Apply(in Input, now time.Time) (Outcome, error) {
	out, err := g.Decide(in, now)
	if err != nil {
		return out, err
	}
	return out, g.FoldAll(out.Events, now)
}

// Decide decides one Command without changing the Group: the events to
// append (and effects), or a *protocol.Error. Apply is Decide, then Fold
// of each event.
func (g *Group) Decide(in Input, now time.Time) (Outcome, error) {
	t := g.begin(in, now)
	if err := t.dispatch(); err != nil {
		return Outcome{Effects: t.audit}, err
	}
	t.check()
	return t.out, nil
}

// FoldAll folds events the Group just decided at now. An error means
// Decide and Fold disagree: a defect, reported as INTERNAL_ERROR.
func (g *Group) FoldAll(events []EventDraft, now time.Time) error {
	at := protocol.NewTime(now)
	for _, d := range events {
		if err := g.Fold(d.At(at)); err != nil {
			return protocol.Errorf(protocol.CodeInternalError, "fold %s: %v", d.Type, err)
		}
	}
	return nil
}

// decidedCheck, when set (by tests), receives the state a decision left in
// its working copies and the state Fold gives from its events; they must be
// equal, or Fold has drifted from Decide.
var decidedCheck func(decided, folded *Group)

// check hands the decision's working state to decidedCheck with the state
// Fold gives, both on copies of the Group.
func (t *txn) check() {
	if decidedCheck == nil {
		return
	}
	decided, folded := t.g.shallowCopy(), t.g.shallowCopy()
	t.commitTo(decided)
	if err := folded.FoldAll(t.out.Events, t.now); err != nil {
		panic(err)
	}
	decidedCheck(decided, folded)
}

func (g *Group) shallowCopy() *Group {
	c := *g
	c.Items = make(map[string]*WorkItem, len(g.Items))
	for id, w := range g.Items {
		c.Items[id] = w
	}
	c.Proposals = make(map[string]*Proposal, len(g.Proposals))
	for id, p := range g.Proposals {
		c.Proposals[id] = p
	}
	if g.Contexts != nil {
		c.Contexts = make(map[string]*ContextHead, len(g.Contexts))
		for id, h := range g.Contexts {
			c.Contexts[id] = h
		}
	}
	return &c
}

// ApplyChildOutcome applies a linked child Mission's terminal state to its
// parent WorkItem: approved → verified, anything else → blocked or failed per
// the declared child-failure policy (spec 10.2).
func (g *Group) ApplyChildOutcome(o ChildOutcome, now time.Time) (Outcome, error) {
	t := g.begin(Input{ActionID: o.CausationID, GroupID: g.GroupID, Actor: AuthorityActor}, now)
	if err := t.childOutcome(o); err != nil {
		return Outcome{}, err
	}
	return t.apply()
}

// AuthorityActor is the actor of automatic events (spec 15.2: caused by an
// earlier event, a timer or policy).
var AuthorityActor = protocol.Actor{Kind: protocol.ActorService, ID: "group-authority"}

// txn is one decision in progress: writes go to copies that commit swaps in
// only when the whole input succeeded.
type txn struct {
	g         *Group
	in        Input
	now       time.Time
	lim       Limits
	mission   *protocol.Mission
	items     map[string]*WorkItem
	proposals map[string]*Proposal
	contexts  map[string]*ContextHead
	ancestors []string
	profiles  []protocol.ProfilePin
	out       Outcome
	audit     []Effect
}

func (g *Group) begin(in Input, now time.Time) *txn {
	t := &txn{g: g, in: in, now: now, lim: g.Limits.WithDefaults(), items: map[string]*WorkItem{}, proposals: map[string]*Proposal{}, ancestors: g.Ancestors, profiles: g.Profiles}
	if g.Mission != nil {
		m := *g.Mission
		if m.Coordinator != nil {
			c := *m.Coordinator
			m.Coordinator = &c
		}
		t.mission = &m
	}
	return t
}

// apply ends a decision: the events are folded into the Group.
func (t *txn) apply() (Outcome, error) {
	t.check()
	return t.out, t.g.FoldAll(t.out.Events, t.now)
}

// commitTo writes the decision's working copies into g; only the fold
// check uses it, to compare them with what Fold gives.
func (t *txn) commitTo(g *Group) {
	if g.Items == nil {
		g.Items = map[string]*WorkItem{}
	}
	if g.Proposals == nil {
		g.Proposals = map[string]*Proposal{}
	}
	g.Mission = t.mission
	g.Ancestors, g.Profiles = t.ancestors, t.profiles
	for id, w := range t.items {
		g.Items[id] = w
	}
	for id, p := range t.proposals {
		g.Proposals[id] = p
	}
	if len(t.contexts) > 0 && g.Contexts == nil {
		g.Contexts = map[string]*ContextHead{}
	}
	for id, h := range t.contexts {
		g.Contexts[id] = h
	}
}

// item returns the working copy of a WorkItem, or nil when it does not exist.
func (t *txn) item(id string) *WorkItem {
	if w, ok := t.items[id]; ok {
		return w
	}
	w, ok := t.g.Items[id]
	if !ok {
		return nil
	}
	c := w.Clone()
	t.items[id] = c
	return c
}

// peek reads a WorkItem without taking a working copy.
func (t *txn) peek(id string) *WorkItem {
	if w, ok := t.items[id]; ok {
		return w
	}
	return t.g.Items[id]
}

// itemIDs lists every WorkItem id, committed or created in this txn.
func (t *txn) itemIDs() []string {
	ids := make([]string, 0, len(t.g.Items)+len(t.items))
	for id := range t.g.Items {
		ids = append(ids, id)
	}
	for id := range t.items {
		if _, ok := t.g.Items[id]; !ok {
			ids = append(ids, id)
		}
	}
	sortStrings(ids)
	return ids
}

func (w *WorkItem) Clone() *WorkItem {
	c := *w
	if w.Offer != nil {
		o := *w.Offer
		c.Offer = &o
	}
	if w.Ownership != nil {
		o := *w.Ownership
		c.Ownership = &o
	}
	if w.Lease != nil {
		l := *w.Lease
		l.Renewals = append(protocol.List[protocol.Time](nil), w.Lease.Renewals...)
		c.Lease = &l
	}
	if w.Blocker != nil {
		b := *w.Blocker
		c.Blocker = &b
	}
	if w.Checkpoint != nil {
		k := *w.Checkpoint
		c.Checkpoint = &k
	}
	if w.BlockedUntil != nil {
		b := *w.BlockedUntil
		c.BlockedUntil = &b
	}
	return &c
}

// emitMission appends an event on the Mission aggregate.
func (t *txn) emitMission(typ protocol.EventType, p MissionPayload) {
	t.mission.Revision++
	*p.Ref() = MissionRef{MissionID: t.mission.MissionID, State: t.mission.State}
	t.out.Events = append(t.out.Events, EventDraft{
		Type:      typ,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregateMission, ID: t.mission.MissionID},
		Revision:  t.mission.Revision,
		Actor:     t.in.Actor,
		Payload:   p,
	})
}

// emitWork appends an event on a WorkItem aggregate; w is its working copy.
func (t *txn) emitWork(typ protocol.EventType, w *WorkItem, p WorkPayload) {
	w.Revision++
	w.UpdatedAt = protocol.NewTime(t.now)
	*p.Ref() = WorkRef{WorkItemID: w.WorkItemID, State: w.State}
	t.out.Events = append(t.out.Events, EventDraft{
		Type:      typ,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: w.WorkItemID},
		Revision:  w.Revision,
		Actor:     t.in.Actor,
		Payload:   p,
	})
}

func (t *txn) effect(e Effect) { t.out.Effects = append(t.out.Effects, e) }

// dispatch routes by command type. Types this core does not decide are
// refused rather than ignored, so a caller cannot believe a message or
// membership change went through the state machines.
func (t *txn) dispatch() error {
	switch t.in.Type {
	case protocol.CmdMissionCreate:
		return t.missionCreate()
	case protocol.CmdMissionCreateFollowUp:
		return t.missionCreateFollowUp()
	case protocol.CmdMissionAssignCoordinator, protocol.CmdMissionRenewCoordinator,
		protocol.CmdMissionSubmitForApproval, protocol.CmdMissionApprove,
		protocol.CmdMissionRequestChanges, protocol.CmdMissionCancel,
		protocol.CmdMissionTerminate, protocol.CmdMissionCreateChild:
		return t.missionCommand()
	case protocol.CmdWorkPropose, protocol.CmdWorkAuthorize, protocol.CmdWorkOffer,
		protocol.CmdWorkAcceptOffer, protocol.CmdApprovalGrantExecution,
		protocol.CmdWorkStart, protocol.CmdWorkCheckpoint, protocol.CmdWorkBlock,
		protocol.CmdWorkUnblock, protocol.CmdWorkSubmit, protocol.CmdWorkAcceptResult,
		protocol.CmdWorkFail, protocol.CmdWorkCancel, protocol.CmdLeaseRenew,
		protocol.CmdDependencyInsert:
		return t.workCommand()
	case protocol.CmdContextPublish:
		return t.publishContext()
	}
	return protocol.Errorf(protocol.CodeInvalidCommand, "%s is not decided by the Mission or WorkItem state machines", t.in.Type)
}

// checkRevision compares the expected revision with the aggregate's current
// one (spec 15.3).
func (t *txn) checkRevision(kind protocol.AggregateKind, id string, current uint64) error {
	return CheckRevision(t.in.ExpectedRevision, kind, id, current)
}

// CheckRevision is the optimistic concurrency rule of spec 15.3: a mismatch
// is REVISION_CONFLICT before anything applies. A nil expected revision
// always passes.
func CheckRevision(expected *uint64, kind protocol.AggregateKind, id string, current uint64) error {
	if expected == nil || *expected == current {
		return nil
	}
	e := protocol.Errorf(protocol.CodeRevisionConflict, "%s %s is at revision %d, command expected %d", kind, id, current, *expected)
	e.Details = map[string]any{"aggregate": map[string]any{"kind": string(kind), "id": id}, "currentRevision": current}
	return e
}

// payload type-asserts the Input payload.
func payloadAs[T any](in Input) (*T, error) {
	p, ok := in.Payload.(*T)
	if !ok || p == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "%s: payload is %T", in.Type, in.Payload)
	}
	return p, nil
}

func before(now time.Time, t protocol.Time) bool { return now.Before(t.Time) }

// RequireCoordinator checks that in acts on the Mission's current
// coordinator lease (epoch, identity or delegation, unexpired).
func (g *Group) RequireCoordinator(in Input, now time.Time) error {
	return g.begin(in, now).requireCoordinator()
}

// RequireOwnerOrCoordinator admits the MissionOwner, or the coordinator on
// its current epoch and lease.
func (g *Group) RequireOwnerOrCoordinator(in Input, now time.Time) error {
	t := g.begin(in, now)
	if t.isOwner() {
		return nil
	}
	return t.requireCoordinator()
}
