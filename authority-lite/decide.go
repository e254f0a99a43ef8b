package authoritylite

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// call is one authenticated command on its way through the pipeline.
type call struct {
	s       *Service
	cmd     *protocol.Command
	payload any
	digest  string
	now     time.Time
	// automatic marks events caused by an earlier command: no receipt.
	automatic bool
	// prior is the command's receipt key as read before the Group's lock.
	prior priorReceipt
}

// pending is what a decision writes: events in order, plus the state they
// leave behind, committed together.
type pending struct {
	now       protocol.Time
	grants    bool     // the Group's grant records changed
	leases    []string // the lease records that changed, by id
	archived  bool     // the Group was archived
	artifacts bool     // the Group's artifact revisions changed
	// ancestors are charges to ancestor Groups, locked until written.
	ancestors []*ancestorCharge
	drafts    []group.EventDraft
	audit     []any
	children  []group.ChildMissionRequested
	notices   []group.ParentNotice
	// owed are children and notices as follow-ups, once sealed; settles
	// are the keys of follow-ups this decision carries out.
	owed    []owed
	settles [][]byte
}

// decideInGroup runs the Group-scoped part of the pipeline under the
// Group's lock: idempotency, session and membership epochs, then the
// decision, then the durable append.
func (s *Service) decideInGroup(c *call, gs *groupState) (*protocol.Receipt, *pending, func() error, error) {
	if err := s.checkActionID(c); err != nil {
		var r errReplay
		if errors.As(err, &r) {
			return &r.receipt, nil, nil, nil
		}
		return nil, nil, nil, err
	}
	// Checked again under the lock: a command that passed the check in
	// submit while an earlier one's write was failing must not be decided
	// on the state that write left in memory.
	if err := s.failedWrite(); err != nil {
		return nil, nil, nil, err
	}
	if !mayKnow(s.org, c.cmd.Actor, gs) {
		return nil, nil, nil, group.GroupNotFound(gs.id)
	}
	if gs.archived {
		return nil, nil, nil, protocol.InvalidTransition("group %s is archived", gs.id)
	}
	if err := checkPrincipal(s.org, c, gs); err != nil {
		return nil, nil, nil, err
	}
	if err := s.profiles.checkGroupExtensions(c, gs); err != nil {
		return nil, nil, nil, err
	}
	grant, near, err := s.policyGate(c, gs)
	if err != nil {
		return nil, nil, nil, err
	}
	p := pending{now: protocol.NewTime(c.now)}
	_, buffered := c.cmd.Extensions[protocol.OfflineExtensionURI]
	switch {
	case buffered:
		err = s.reconcile(c, gs, &p)
	default:
		err = s.dispatch(c, gs, &p)
	}
	if err != nil {
		s.releaseAncestors(&p)
		if len(p.audit) > 0 {
			s.keepAudit(p.audit)
		}
		return nil, nil, nil, err
	}
	if grant != nil {
		p.record(gs, group.Consume(grant, group.InputFromCommand(c.cmd, c.payload)))
	}
	for i := range near {
		s.tellSoftLimit(c, gs, &near[i], &p)
	}
	p.leases = append(p.leases, s.trackLeases(gs, p.drafts, c.now)...)
	if err := s.issueTokens(gs, p.drafts); err != nil {
		s.releaseAncestors(&p)
		s.writer.fail(err)
		return nil, nil, nil, err
	}
	r, wait, err := s.commit(c, gs, &p)
	if err != nil {
		return nil, nil, nil, err
	}
	return r, &p, wait, nil
}

// dispatch routes a live (not offline-buffered) command: memberships,
// messages, grants and artifacts to their rules in package group, the rest
// to the Mission and WorkItem state machines.
func (s *Service) dispatch(c *call, gs *groupState, p *pending) error {
	in, dir := group.InputFromCommand(c.cmd, c.payload), directory{s.org}
	switch c.cmd.Type {
	case protocol.CmdPolicyGrantCooperationOverride:
		d, err := gs.grants.DecideGrant(gs.g, in, dir, c.now)
		return decided(gs, p, d, err)
	case protocol.CmdGroupArchive:
		return s.archive(c, gs, p)
	case protocol.CmdMembershipChange, protocol.CmdMembershipEnd, protocol.CmdMembershipGrantDelegation:
		d, err := gs.members.DecideMembership(gs.g, in, dir, c.now)
		return decided(gs, p, d, err)
	case protocol.CmdMessagePost, protocol.CmdMessageCorrect, protocol.CmdMessageRetract, protocol.CmdMessageRedact:
		d, err := s.messages(gs).DecideMessage(gs.g, in)
		return decided(gs, p, d, err)
	case protocol.CmdArtifactPublish:
		return s.publishArtifact(c, gs, p)
	case protocol.CmdResourceUsageRecord:
		return s.recordUsage(c, gs, p)
	}
	if err := precheck(s.org, gs, in); err != nil {
		return err
	}
	return applyCore(c, gs, p)
}

// mayKnow reports whether the actor may learn that the Group exists: an
// active member, or an Organization policy service.
func mayKnow(o *org, a protocol.Actor, gs *groupState) bool {
	if a.Kind == protocol.ActorService {
		return o.isPolicyService(a.ID)
	}
	return gs.members.Active(a) != nil
}

// checkPrincipal applies the session and membership rules of spec 15.1
// that need the Organization's and the Group's state; mayKnow has
// admitted the actor to the Group already.
func checkPrincipal(o *org, c *call, gs *groupState) error {
	cmd := c.cmd
	switch cmd.Actor.Kind {
	case protocol.ActorService:
		return nil
	case protocol.ActorAgent:
		cur := o.sessionEpoch(cmd.Actor.ID)
		if cmd.SessionEpoch == nil || *cmd.SessionEpoch != cur || cur == 0 {
			e := protocol.Errorf(protocol.CodeAuthStaleSession, "session epoch of %s is %d; the command carries %s", cmd.Actor.ID, cur, epochString(cmd.SessionEpoch)).At("/sessionEpoch")
			return protocol.WithDetails(e, "sessionEpoch", cur)
		}
	}
	return gs.members.CheckEpoch(gs.id, cmd.Actor, cmd.MembershipEpoch)
}

func epochString(e *uint64) string {
	if e == nil {
		return "none"
	}
	return fmt.Sprint(*e)
}

// applyCore hands the command to the Mission and WorkItem state machines.
func applyCore(c *call, gs *groupState, p *pending) error {
	in := group.InputFromCommand(c.cmd, c.payload)
	in.Delegated = gs.members.Delegated(gs.g, in, c.now)
	out, err := gs.g.Apply(in, c.now)
	for _, e := range out.Effects {
		switch e := e.(type) {
		case group.LateResult:
			p.audit = append(p.audit, e)
		case group.ChildMissionRequested:
			p.children = append(p.children, e)
		case group.ParentNotice:
			p.notices = append(p.notices, e)
		}
	}
	if err != nil {
		return err
	}
	p.drafts = append(p.drafts, out.Events...)
	if c.cmd.Type == protocol.CmdMissionAssignCoordinator && gs.g.Mission != nil && gs.g.Mission.Coordinator != nil {
		ensureMember(gs, protocol.Actor{Kind: protocol.ActorAgent, ID: gs.g.Mission.Coordinator.AgentID}, protocol.RoleCoordinator, c.cmd.Actor, p)
	}
	return nil
}

// commit turns drafts into sequenced events and reserves their place in
// the group commit, with the aggregates they touched and the receipt, as
// one write. It runs under the Group's lock; the returned wait, called
// after the lock is released, signs the events (most of a command's CPU
// beside verification: it runs beside the next command's decision), lets
// the write go and blocks until it is durable. Only then is the receipt
// handed out and are subscribers woken. wait must always be called: the
// writer holds every later write until it is.
func (s *Service) commit(c *call, gs *groupState, p *pending) (*protocol.Receipt, func() error, error) {
	events, receipt, err := s.number(c, gs.id, gs.last, p.drafts)
	if err != nil {
		s.writer.fail(err)
		return nil, nil, err
	}
	gs.counts.touch(gs.g.Items, p.drafts)
	lastSeq := gs.last
	if len(events) > 0 {
		lastSeq = *events[len(events)-1].ev.Sequence
	}
	if p.owed, err = followUps(c, gs.id, lastSeq, p); err != nil {
		s.writer.fail(err)
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "follow-ups: %v", err)
	}
	w, err := s.encodeCommit(c, gs, p, events, receipt)
	if err != nil {
		s.releaseAncestors(p)
		s.writer.fail(err)
		return nil, nil, err
	}
	if w.rkey != nil {
		s.receipts.begin(w.rkey, c.digest, receipt)
	}
	if gs.g.Mission != nil {
		gs.missionID = gs.g.Mission.MissionID
	}
	for _, a := range p.ancestors {
		a.gs.descendants = a.descendants
	}
	// w.signErr is set before release and read by the writer after it.
	done, release := s.writer.reserve(w.apply)
	s.releaseAncestors(p)
	gs.last = lastSeq
	wait := func() error {
		// Signing is most of a command's work under load; here it runs
		// beside the next command's decision instead of under the lock.
		w.signErr = s.sign(events)
		if w.signErr == nil {
			w.signErr = w.rec.putEvents(events, &gs.tail)
		}
		if w.signErr != nil {
			s.writer.fail(w.signErr)
		}
		release()
		return s.settle(w, gs, events, <-done)
	}
	return receipt, wait, nil
}

// commitWrite is one command's write to the log, encoded under the
// Group's lock and applied by the writer once its events are signed.
type commitWrite struct {
	groupID    string
	rec        *recorder
	audits     [][]byte
	rkey, rval []byte // the receipt, none for an automatic command
	anc        []ancestorWrite
	owed       []owed
	settles    [][]byte
	signErr    error
}

// ancestorWrite is an ancestor Group's new descendant usage.
type ancestorWrite struct {
	group string
	raw   []byte
}

// encodeCommit encodes what the command writes beside its events: the
// Group's changed records, audit records, the receipt and the ancestors'
// usage. Its errors are INTERNAL_ERROR.
func (s *Service) encodeCommit(c *call, gs *groupState, p *pending, events []sealed, receipt *protocol.Receipt) (*commitWrite, error) {
	w := &commitWrite{groupID: gs.id, rec: &recorder{}, owed: p.owed, settles: p.settles}
	if err := s.writeGroup(w.rec, gs, p, events); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "encode state: %v", err)
	}
	for _, a := range p.audit {
		raw, err := json.Marshal(a)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternalError, "encode audit: %v", err)
		}
		w.audits = append(w.audits, raw)
	}
	if !c.automatic {
		raw, err := json.Marshal(receiptRecord{Digest: c.digest, Receipt: *receipt})
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternalError, "encode receipt: %v", err)
		}
		w.rkey, w.rval = receiptKey(c.cmd.Actor, c.cmd.ActionID), raw
	}
	for _, a := range p.ancestors {
		raw, err := json.Marshal(a.descendants)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternalError, "encode ancestor usage: %v", err)
		}
		w.anc = append(w.anc, ancestorWrite{a.gs.id, raw})
	}
	return w, nil
}

// apply writes w in the writer's transaction.
func (w *commitWrite) apply(tx logstore.Tx) error {
	if w.signErr != nil {
		return w.signErr
	}
	gb, err := openGroupBuckets(tx, w.groupID, true)
	if err != nil {
		return err
	}
	if err := w.rec.apply(gb); err != nil {
		return err
	}
	for _, a := range w.anc {
		ab, err := openGroupBuckets(tx, a.group, false)
		if err != nil || ab == nil {
			return fmt.Errorf("ancestor group %s: %v", a.group, err)
		}
		if err := ab.meta.Put(keyDescendants, a.raw); err != nil {
			return err
		}
	}
	for _, a := range w.audits {
		if err := putAudit(tx, a); err != nil {
			return err
		}
	}
	if err := putFollowUps(tx, w.owed); err != nil {
		return err
	}
	for _, k := range w.settles {
		if err := tx.Bucket(bucketFollowUps).Delete(k); err != nil {
			return err
		}
	}
	if w.rkey == nil {
		return nil
	}
	if err := tx.Bucket(bucketReceipts).Put(w.rkey, w.rval); err != nil {
		return err
	}
	return indexReceipt(tx, w.groupID, w.rkey)
}

// settle ends a commit once the writer answered: the receipt leaves the
// in-flight set, and on success subscribers and membership waiters wake.
func (s *Service) settle(w *commitWrite, gs *groupState, events []sealed, err error) error {
	if w.signErr != nil {
		err = w.signErr
	}
	if w.rkey != nil {
		s.receipts.end(w.rkey, err)
	}
	if w.signErr != nil {
		return w.signErr
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "append: %v", err)
	}
	if len(events) > 0 {
		gs.notify()
	}
	if changesMembership(events) {
		s.memberNotice.notify()
	}
	return nil
}

// commitNow commits and waits, for callers that hold locks anyway (Group
// creation, automatic follow-ups).
func (s *Service) commitNow(c *call, gs *groupState, p *pending) (*protocol.Receipt, error) {
	r, wait, err := s.commit(c, gs, p)
	if err != nil {
		return nil, err
	}
	if err := wait(); err != nil {
		return nil, err
	}
	return r, nil
}

type sealed struct {
	ev  *protocol.Event
	raw []byte
}

// seal numbers and signs drafts as the Group's next events.
func (s *Service) seal(c *call, groupID string, last uint64, drafts []group.EventDraft) ([]sealed, *protocol.Receipt, error) {
	events, receipt, err := s.number(c, groupID, last, drafts)
	if err == nil {
		err = s.sign(events)
	}
	if err != nil {
		return nil, nil, err
	}
	return events, receipt, nil
}

// sign signs numbered events. Each is validated against event.schema.json
// (its type's payload schema and aggregate kind) before it is signed: an
// event that does not conform is a fault of the authority,
// INTERNAL_ERROR, and nothing is committed.
func (s *Service) sign(events []sealed) error {
	for i := range events {
		raw, err := signEvent(events[i].ev, s.key)
		if err != nil {
			return err
		}
		events[i].raw = raw
	}
	return nil
}

// number gives drafts the Group's next sequences, as events not yet
// signed, and builds their receipt. It runs under the Group's lock.
func (s *Service) number(c *call, groupID string, last uint64, drafts []group.EventDraft) ([]sealed, *protocol.Receipt, error) {
	receipt := &protocol.Receipt{ActionID: c.cmd.ActionID, Events: protocol.List[protocol.EventRef]{}}
	out := make([]sealed, 0, len(drafts))
	for i, d := range drafts {
		payload, err := json.Marshal(d.Payload)
		if err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeInternalError, "event payload: %v", err)
		}
		seq, rev, agg := last+uint64(i)+1, d.Revision, d.Aggregate
		ev := &protocol.Event{
			EventID: newEventID(), GroupID: groupID, Sequence: &seq, Aggregate: &agg, Revision: &rev,
			Type: d.Type, Actor: d.Actor, CausationID: c.cmd.ActionID, CorrelationID: c.cmd.CorrelationID,
			OccurredAt: protocol.NewTime(c.now), AcceptedBy: s.cfg.ID, Payload: payload,
		}
		if d.Actor == c.cmd.Actor {
			ev.Extensions = protocol.Relayed(c.cmd.Extensions, protocol.KnownExtension)
		}
		out = append(out, sealed{ev: ev})
		receipt.Events = append(receipt.Events, protocol.EventRef{EventID: ev.EventID, GroupID: groupID, Sequence: protocol.Uint64(seq)})
	}
	return out, receipt, nil
}

// signEvent validates and signs one event the authority decided. A
// schema refusal becomes INTERNAL_ERROR carrying the problems: the command
// was valid, the authority's own event is not.
func signEvent(ev *protocol.Event, key protocol.PrivateKey) ([]byte, error) {
	raw, err := protocol.SignedEventChecked(ev, key)
	if err == nil {
		return raw, nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && (pe.Code == protocol.CodeSchemaValidationFailed || pe.Code == protocol.CodeWorkContractIncomplete) {
		ie := protocol.Errorf(protocol.CodeInternalError, "the authority's %s event does not conform to its schema: %s", ev.Type, pe.Message).At(pe.Pointer)
		ie.Details = pe.Details
		return nil, ie
	}
	return nil, protocol.Errorf(protocol.CodeInternalError, "sign event: %v", err)
}

// putEvents records signed events, for t to take once they are durable.
func (r *recorder) putEvents(events []sealed, t *eventTail) error {
	for _, e := range events {
		if err := r.events.Put(seqKey(*e.ev.Sequence), e.raw); err != nil {
			return err
		}
	}
	r.tail, r.added = t, append(r.added, tailEvents(events)...)
	return nil
}

// writeGroup stores the records events changed that the log does not give
// back by itself; the events themselves go in with putEvents once signed. The Mission, WorkItem and proposal records are
// a checkpoint (see savedState): rewritten, only those that changed, once
// checkpointEvery events have passed since the last one.
func (s *Service) writeGroup(gb *recorder, gs *groupState, p *pending, events []sealed) error {
	members, usage := false, false
	for _, e := range events {
		if e.ev.Aggregate.Kind == protocol.AggregateMembership {
			members = true
		}
		if e.ev.Type == protocol.EvtResourceUsageRecorded {
			usage = true
		}
	}
	gs.saved.note(events)
	first := len(events) > 0 && *events[0].ev.Sequence == 1
	if first {
		// A new Group: its records start empty, before its first event.
		if err := gb.meta.Put(keyStateSeq, seqKey(0)); err != nil {
			return err
		}
	}
	if members || first {
		if err := putJSON(&gb.meta, keyMembers, gs.members); err != nil {
			return err
		}
	}
	if usage {
		if err := putJSON(&gb.meta, keyUsage, gs.usage); err != nil {
			return err
		}
	}
	if p.grants {
		if err := putJSON(&gb.meta, keyGrants, gs.grants); err != nil {
			return err
		}
	}
	if p.artifacts {
		if err := putJSON(&gb.meta, keyArtifacts, gs.artifacts); err != nil {
			return err
		}
	}
	if p.archived {
		if err := gb.meta.Put(keyArchived, []byte{1}); err != nil {
			return err
		}
	}
	for _, id := range p.leases {
		if err := putJSON(&gb.leases, []byte(id), gs.leases[id]); err != nil {
			return err
		}
	}
	if n := len(events); n > 0 {
		if last := *events[n-1].ev.Sequence; last >= gs.saved.seq+s.checkpointEvery() {
			return gs.checkpoint(gb, last)
		}
	}
	return nil
}

func putAudit(tx logstore.Tx, raw []byte) error {
	b := tx.Bucket(bucketAudit)
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(seqKey(n), raw)
}

func appendAudit(tx logstore.Tx, a any) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return putAudit(tx, raw)
}

// keepAudit stores records of a refused command that the spec wants kept
// (late results of a fenced owner) in their own transaction.
func (s *Service) keepAudit(recs []any) {
	err := s.db.Update(func(tx logstore.Tx) error {
		for _, a := range recs {
			if err := appendAudit(tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error("audit record lost", "err", err)
	}
}

// LateResults returns every stored late result, oldest first.
func (s *Service) LateResults() ([]group.LateResult, error) {
	var out []group.LateResult
	err := s.db.View(func(tx logstore.Tx) error {
		return tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
			var r group.LateResult
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}
