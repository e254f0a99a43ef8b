package queue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Incoming is one received event, already verified by the caller.
type Incoming struct {
	// Raw is the event's RFC 8785 (JCS) bytes, stored verbatim in the inbox
	// and replayed on Rebuild.
	Raw []byte
	// Event is Raw decoded. When nil, Apply decodes Raw itself. When set it
	// must be Raw's decoding: the projection reads it now and Raw on Rebuild.
	Event *protocol.Event
}

// Decode builds an Incoming from an event document: strict I-JSON parsing,
// exact typed decoding and canonical bytes, the signature not checked. The
// runtime verifies and decodes in one step (protocol.InboundEventFrame) and
// builds Incoming directly.
func Decode(doc []byte) (Incoming, error) {
	v, err := protocol.Parse(doc, protocol.DecodeOptions{})
	if err != nil {
		return Incoming{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Incoming{}, protocol.Errorf(protocol.CodeProtocolViolation, "an event must be a JSON object")
	}
	ev, raw, err := protocol.InboundEvent(m, nil)
	if err != nil {
		return Incoming{}, err
	}
	return Incoming{Raw: raw, Event: ev}, nil
}

// Batch is what one turn of the session loop makes durable together
// (Commit): the events received, the Commands to record before sending
// them, and the answered Commands to take out of the outbox.
type Batch struct {
	Events   []Incoming
	Puts     []OutboxPut
	Answered []string // actionIds
}

// Ref names one event.
type Ref struct {
	GroupID  string `json:"groupId,omitempty"`
	EventID  string `json:"eventId"`
	Sequence uint64 `json:"sequence,omitempty"`
}

// Problem is an event Apply refused or could not interpret.
type Problem struct {
	Ref
	Err *protocol.Error `json:"error"`
}

// ItemRef names one WorkItem of a Group.
type ItemRef struct {
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
}

// Gap is a Group whose buffer holds events beyond a missing range: the
// events after Cursor and before FirstHeld must be fetched again by replay
// (SUBSCRIBE with afterSequence = Cursor).
type Gap struct {
	GroupID   string `json:"groupId"`
	Cursor    uint64 `json:"cursor"`
	FirstHeld uint64 `json:"firstHeld"`
}

// Result says what Apply did with each event of a batch.
type Result struct {
	Applied    []Ref // stored in the inbox, projected, under the cursor
	Duplicates []Ref // already applied or already held
	Buffered   []Ref // held in memory until the gap before them fills
	Dropped    []Ref // not held (buffer bounds): fetch again by replay
	// Rejected events were not stored: malformed envelope, a sequence or
	// eventId that conflicts with an accepted event.
	Rejected []Problem
	// Problems are applied events (in the inbox, cursor past them) whose
	// payload the projection could not interpret; the view ignored them.
	Problems []Problem
	Org      []Ref             // Organization-scoped events newly stored
	Answered []string          // outbox actionIds answered by an applied event
	Changed  []ItemRef         // WorkItems whose view changed
	Members  []MemberRef       // memberships that changed (Store.Membership)
	Cursors  []protocol.Cursor // Groups whose durable cursor advanced: ACK these
	Gaps     []Gap             // Groups waiting on a gap after this batch
	// Diverged are Groups found in this batch to contradict an applied
	// event (see Divergence): none of their events apply any more.
	Diverged []Divergence
	// PutRefused are Batch.Puts not recorded: the outbox holds other
	// bytes under their actionId (ACTION_ID_COLLISION).
	PutRefused []PutRefusal
}

// candidateEv is an event routed to a Group and not yet known to be a
// duplicate of an applied one.
type candidateEv struct {
	in  Incoming
	ev  *protocol.Event
	ref Ref
}

// groupPlan is one Group's share of a batch.
type groupPlan struct {
	g       *groupState
	isNew   bool
	pending map[uint64]candidateEv // new in-order-or-ahead events by sequence
	// Filled in by the transaction, used after it commits:
	ov       *overlay
	cursor   uint64
	fromBuf  []uint64 // buffered sequences applied or rejected
	applied  []Ref    // in sequence order, for the id window
	leftover []candidateEv
	// applied0 are events at sequences already applied, compared with
	// the stored ones; diverged is set when one contradicts it.
	applied0 []candidateEv
	diverged *Divergence
	// pruned is the Group's new base when this commit pruned its inbox;
	// pruneCheck the cursor before which it is not looked at again.
	pruned, pruneCheck uint64
}

// Apply takes a batch of verified events (any Groups, any order, duplicates
// allowed) and applies what it can in one bbolt transaction: routed by
// groupId first; deduplicated by eventId and by sequence at or below the
// cursor; each Group strictly in sequence order, so its durable cursor never
// passes a gap; inbox append, projection and cursor advance together. Events
// ahead of a gap wait in the Group's bounded memory buffer. It is Commit
// with events only.
//
// An error means the transaction did not commit: nothing of the batch was
// applied or buffered, and the caller replays from the durable cursors.
func (s *Store) Apply(batch []Incoming) (Result, error) {
	return s.Commit(Batch{Events: batch})
}

// Commit makes a Batch durable in one bbolt transaction (group commit):
// its events as Apply describes, its outbox puts and its answered
// Commands' removals. A batch that changes nothing on disk commits
// nothing. An error means nothing of the batch committed.
func (s *Store) Commit(b Batch) (Result, error) {
	batch := b.Events
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return Result{}, ErrClosed
	}
	var res Result
	puts, acks, err := s.outboxChanges(b, &res)
	if err != nil {
		return Result{}, fmt.Errorf("queue: commit: %w", err)
	}
	plans := make(map[string]*groupPlan)
	var org []candidateEv
	orgSeen := make(map[string]bool)

	for _, in := range batch {
		ev := in.Event
		if ev == nil {
			ev = new(protocol.Event)
			if err := json.Unmarshal(in.Raw, ev); err != nil {
				res.Rejected = append(res.Rejected, Problem{Err: protocol.Errorf(protocol.CodeProtocolViolation, "undecodable event: %v", err)})
				continue
			}
		}
		ref := Ref{GroupID: ev.GroupID, EventID: ev.EventID, Sequence: ev.Seq()}
		if perr := checkEnvelope(ev, in.Raw); perr != nil {
			res.Rejected = append(res.Rejected, Problem{Ref: ref, Err: perr})
			continue
		}
		if ev.GroupID == "" {
			if orgSeen[ev.EventID] {
				res.Duplicates = append(res.Duplicates, ref)
				continue
			}
			orgSeen[ev.EventID] = true
			org = append(org, candidateEv{in: in, ev: ev, ref: ref})
			continue
		}
		if s.forgotten[ev.GroupID] {
			res.Duplicates = append(res.Duplicates, ref) // a forgotten Group's stream may still run
			continue
		}
		p := plans[ev.GroupID]
		if p == nil {
			g := s.groups[ev.GroupID]
			p = &groupPlan{g: g, pending: make(map[uint64]candidateEv)}
			if g == nil {
				p.g, p.isNew = newGroupState(ev.GroupID), true
			}
			plans[ev.GroupID] = p
		}
		if d := p.g.diverged; d != nil {
			res.Rejected = append(res.Rejected, Problem{Ref: ref, Err: d.err()})
			continue
		}
		seq := ev.Seq()
		if seq <= p.g.cursor {
			if seq <= p.g.base { // restored from a snapshot: nothing stored to compare
				res.Duplicates = append(res.Duplicates, ref)
			} else {
				p.applied0 = append(p.applied0, candidateEv{in: in, ev: ev, ref: ref})
			}
			continue
		}
		if prev, ok := p.pending[seq]; ok {
			p.dupOrConflict(&res, prev.ev.EventID, ref)
			continue
		}
		if held, ok := p.g.buf.get(seq); ok {
			p.dupOrConflict(&res, eventIDOf(held), ref)
			continue
		}
		p.pending[seq] = candidateEv{in: in, ev: ev, ref: ref}
	}

	if err := s.compareApplied(plans, &res); err != nil {
		return Result{}, fmt.Errorf("queue: apply: %w", err)
	}
	var diverged []*Divergence
	for _, p := range plans {
		if p.diverged == nil {
			continue
		}
		// Stop here: what came with the contradiction is refused too.
		for _, c := range p.pending {
			res.Rejected = append(res.Rejected, Problem{Ref: c.ref, Err: p.diverged.err()})
		}
		p.pending = map[uint64]candidateEv{}
		diverged = append(diverged, p.diverged)
	}
	slices.SortFunc(diverged, func(a, b *Divergence) int { return strings.Compare(a.GroupID, b.GroupID) })

	groupIDs := make([]string, 0, len(plans))
	for id, p := range plans {
		if _, ok := p.pending[p.g.cursor+1]; ok {
			groupIDs = append(groupIDs, id)
		} else {
			for _, c := range p.pending {
				p.leftover = append(p.leftover, c)
			}
		}
	}
	slices.Sort(groupIDs)

	if len(groupIDs) > 0 || len(org) > 0 || len(diverged) > 0 || len(puts) > 0 || len(acks) > 0 {
		var txRes Result
		err := s.update(func(tx *bolt.Tx) error {
			txRes = Result{}
			for _, d := range diverged {
				if err := putDivergence(tx, d); err != nil {
					return err
				}
			}
			for _, id := range groupIDs {
				p := plans[id]
				if err := s.applyGroup(tx, p, &txRes); err != nil {
					return err
				}
				p.pruned = 0
				if point := s.prunePoint(p); point > 0 {
					if err := pruneGroup(tx, id, point, p.cursor); err != nil {
						return err
					}
					p.pruned = point
				}
			}
			if err := applyOrg(tx, org, &txRes); err != nil {
				return err
			}
			if err := writeOutbox(tx, puts, acks); err != nil {
				return err
			}
			if s.failApply != nil {
				return s.failApply()
			}
			return nil
		})
		s.commits.Add(1)
		if err != nil {
			return Result{}, fmt.Errorf("queue: apply: %w", err)
		}
		res.merge(txRes)
	}

	// Committed: make memory match the file, then hold what came early.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleOutbox(puts, acks, res.Answered)
	ids := make([]string, 0, len(plans))
	for id := range plans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.settle(id, plans[id], &res)
	}
	return res, nil
}

// settle makes memory match a committed plan, then holds the Group's events
// that came early. s.mu must be held for writing.
func (s *Store) settle(id string, p *groupPlan, res *Result) {
	g := p.g
	if p.diverged != nil && !p.isNew {
		g.diverged = p.diverged
		g.buf.dropThrough(^uint64(0)) // none of it will apply
		res.Diverged = append(res.Diverged, *p.diverged)
	}
	if p.ov != nil {
		if p.isNew {
			s.groups[id] = g
		}
		p.ov.merge()
		for _, r := range p.applied {
			g.recent.add(r.EventID, r.Sequence)
		}
		for _, seq := range p.fromBuf {
			g.buf.remove(seq)
		}
		if p.pruned > g.base {
			g.base = p.pruned
		}
		g.pruneCheck = max(g.pruneCheck, p.pruneCheck)
		if p.cursor > g.cursor {
			g.cursor = p.cursor
			res.Cursors = append(res.Cursors, protocol.Cursor{GroupID: id, Sequence: g.cursor})
		}
		g.buf.dropThrough(g.cursor)
		for _, wid := range p.ov.changedIDs() {
			res.Changed = append(res.Changed, ItemRef{GroupID: id, WorkItemID: wid})
		}
		for _, m := range p.ov.changedMembers() {
			res.Members = append(res.Members, MemberRef{GroupID: id, Principal: m.Principal})
		}
	} else if p.isNew && len(p.leftover) > 0 {
		s.groups[id] = g
	}
	slices.SortFunc(p.leftover, func(a, b candidateEv) int { return cmp.Compare(a.ref.Sequence, b.ref.Sequence) })
	for _, c := range p.leftover {
		evicted, kept := g.buf.add(held{seq: c.ref.Sequence, in: Incoming{Raw: c.in.Raw, Event: c.ev}}, s.opts.MaxBufferedEvents, s.opts.MaxBufferedBytes)
		for _, h := range evicted {
			res.Dropped = append(res.Dropped, Ref{GroupID: id, EventID: eventIDOf(h.in), Sequence: h.seq})
			res.Buffered = slices.DeleteFunc(res.Buffered, func(r Ref) bool { return r.GroupID == id && r.Sequence == h.seq })
		}
		if kept {
			res.Buffered = append(res.Buffered, c.ref)
		} else {
			res.Dropped = append(res.Dropped, c.ref)
		}
	}
	if len(g.buf.evs) > 0 {
		res.Gaps = append(res.Gaps, Gap{GroupID: id, Cursor: g.cursor, FirstHeld: g.buf.first()})
	}
}

func (p *groupPlan) dupOrConflict(res *Result, heldID string, ref Ref) {
	if heldID == ref.EventID {
		res.Duplicates = append(res.Duplicates, ref)
		return
	}
	res.Rejected = append(res.Rejected, Problem{Ref: ref, Err: protocol.Errorf(protocol.CodeProtocolViolation,
		"group %s sequence %d: event %s conflicts with event %s received for the same sequence", ref.GroupID, ref.Sequence, ref.EventID, heldID)})
}

// applyGroup appends the Group's contiguous run after its cursor, from the
// batch and the buffer, to the inbox and projection, and moves the cursor.
func (s *Store) applyGroup(tx *bolt.Tx, p *groupPlan, res *Result) error {
	_, meta, inbox, queue, err := groupBuckets(tx, p.g.id)
	if err != nil {
		return err
	}
	outIdx := tx.Bucket(bktOutboxIndex)
	ov := newOverlay(p.g)
	p.ov, p.fromBuf, p.leftover, p.applied = ov, nil, nil, nil
	batchIDs := make(map[string]uint64)
	next := p.g.cursor + 1
	used := make(map[uint64]bool)
	for {
		c, ok := p.pending[next]
		if ok {
			used[next] = true
		} else if in, held := p.g.buf.get(next); held {
			c = candidateEv{in: in, ev: in.Event, ref: Ref{GroupID: p.g.id, EventID: in.Event.EventID, Sequence: next}}
			p.fromBuf = append(p.fromBuf, next)
		} else {
			break
		}
		prev, seen := batchIDs[c.ev.EventID]
		if !seen {
			prev, seen = p.g.recent.get(c.ev.EventID)
		}
		if seen {
			// The same eventId under another sequence (RecentEventIDs):
			// never apply a fact that contradicts an accepted one; the
			// Group waits here.
			res.Rejected = append(res.Rejected, Problem{Ref: c.ref, Err: protocol.Errorf(protocol.CodeProtocolViolation,
				"event %s at sequence %d was already accepted at sequence %d", c.ev.EventID, next, prev)})
			break
		}
		if err := inbox.Put(u64(next), c.in.Raw); err != nil {
			return err
		}
		batchIDs[c.ev.EventID] = next
		p.applied = append(p.applied, c.ref)
		f := factOf(c.ev)
		if ch, perr := project(ov, &f); perr != nil {
			res.Problems = append(res.Problems, Problem{Ref: c.ref, Err: perr})
		} else {
			ov.record(ch)
		}
		if c.ev.CausationID != "" {
			if seqKey := outIdx.Get([]byte(c.ev.CausationID)); seqKey != nil {
				if err := ackOutboxTx(tx, c.ev.CausationID); err != nil {
					return err
				}
				res.Answered = append(res.Answered, c.ev.CausationID)
			}
		}
		res.Applied = append(res.Applied, c.ref)
		next++
	}
	p.cursor = next - 1
	for seq, c := range p.pending {
		if !used[seq] {
			p.leftover = append(p.leftover, c)
		}
	}
	if err := meta.Put(keyCursor, u64(p.cursor)); err != nil {
		return err
	}
	if meta.Get(keyBase) == nil {
		if err := meta.Put(keyBase, u64(p.g.base)); err != nil {
			return err
		}
	}
	return writeProjection(meta, queue, ov)
}

// applyOrg stores Organization-scoped events once each, by eventId.
func applyOrg(tx *bolt.Tx, org []candidateEv, res *Result) error {
	b := tx.Bucket(bktOrg)
	for _, c := range org {
		if b.Get([]byte(c.ev.EventID)) != nil {
			res.Duplicates = append(res.Duplicates, c.ref)
			continue
		}
		if err := b.Put([]byte(c.ev.EventID), c.in.Raw); err != nil {
			return err
		}
		res.Org = append(res.Org, c.ref)
	}
	return nil
}

// checkEnvelope rejects what cannot be placed: no eventId; a Group event
// without a positive sequence; an Organization-scoped type with Group
// members or the reverse; no bytes to store.
func checkEnvelope(ev *protocol.Event, raw []byte) *protocol.Error {
	switch {
	case len(raw) == 0:
		return protocol.Errorf(protocol.CodeProtocolViolation, "event has no bytes to store")
	case ev.EventID == "":
		return protocol.Errorf(protocol.CodeProtocolViolation, "event has no eventId").At("/eventId")
	case ev.Type.OrganizationScoped() || ev.GroupID == "":
		if ev.GroupID != "" || ev.Sequence != nil {
			return protocol.Errorf(protocol.CodeProtocolViolation, "Organization-scoped event %s carries groupId or sequence", ev.EventID).At("/groupId")
		}
		if !ev.Type.OrganizationScoped() {
			return protocol.Errorf(protocol.CodeProtocolViolation, "%s event %s has no groupId", ev.Type, ev.EventID).At("/groupId")
		}
	case ev.Sequence == nil || *ev.Sequence == 0:
		return protocol.Errorf(protocol.CodeProtocolViolation, "group event %s has no positive sequence", ev.EventID).At("/sequence")
	}
	return nil
}

func eventIDOf(in Incoming) string {
	if in.Event != nil {
		return in.Event.EventID
	}
	return ""
}

func (r *Result) merge(o Result) {
	r.Applied = append(r.Applied, o.Applied...)
	r.Duplicates = append(r.Duplicates, o.Duplicates...)
	r.Rejected = append(r.Rejected, o.Rejected...)
	r.Problems = append(r.Problems, o.Problems...)
	r.Org = append(r.Org, o.Org...)
	r.Answered = append(r.Answered, o.Answered...)
	r.PutRefused = append(r.PutRefused, o.PutRefused...)
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}
