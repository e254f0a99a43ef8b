package authoritylite

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// org is the Organization service: registered agents with their cards,
// keys and session epochs, human principals, and the policy services. It
// resolves every key the authority verifies.
type org struct {
	s      *Service
	mu     sync.RWMutex
	agents map[string]*agentRecord
	humans map[string]*principalRecord
	policy map[string]*principalRecord
	keys   map[string]ed25519.PublicKey
	// replaced holds, per agent, the channel SessionReplaced handed out for
	// its current session; session_open closes it.
	replaced map[string]chan struct{}
	// nonceIndexed is set once org/nonceTimes is known to exist.
	nonceIndexed atomic.Bool
}

type agentRecord struct {
	Card         protocol.AgentCard `json:"card"`
	CardHash     string             `json:"cardHash"`
	SessionEpoch uint64             `json:"sessionEpoch"`
}

type principalRecord struct {
	ID   string               `json:"id"`
	Kind protocol.ActorKind   `json:"kind"`
	Keys []protocol.PublicKey `json:"keys"`
}

func newOrg(s *Service) *org {
	o := &org{s: s, agents: map[string]*agentRecord{}, humans: map[string]*principalRecord{}, policy: map[string]*principalRecord{}, keys: map[string]ed25519.PublicKey{}, replaced: map[string]chan struct{}{}}
	o.addKey(s.key.Public().Encode())
	return o
}

// PublicKey resolves a key id (protocol.KeyResolver).
func (o *org) PublicKey(keyID string) (ed25519.PublicKey, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	k, ok := o.keys[keyID]
	return k, ok
}

func (o *org) addKey(p protocol.PublicKey) {
	if k, err := protocol.DecodePublicKey(p); err == nil {
		o.keys[k.KeyID] = k.Key
	}
}

func (o *org) load(tx logstore.Tx) error {
	b := tx.Bucket(bucketOrg)
	if err := b.Bucket(bucketAgents).ForEach(func(k, v []byte) error {
		var r agentRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		o.agents[string(k)] = &r
		for _, key := range r.Card.Keys {
			o.addKey(key)
		}
		return nil
	}); err != nil {
		return err
	}
	return b.Bucket(bucketHumans).ForEach(func(k, v []byte) error {
		var r principalRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if r.Kind == protocol.ActorService {
			o.policy[r.ID] = &r
		} else {
			o.humans[r.ID] = &r
		}
		for _, key := range r.Keys {
			o.addKey(key)
		}
		return nil
	})
}

func (o *org) agent(id string) *agentRecord {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.agents[id]
}

func (o *org) sessionEpoch(agentID string) uint64 {
	if a := o.agent(agentID); a != nil {
		return a.SessionEpoch
	}
	return 0
}

func (o *org) isPolicyService(id string) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.policy[id] != nil
}

// AddPrincipal registers a human principal or an Organization policy
// service with its verifying keys (an operator action, not a protocol
// command: spec sections 3–6 on identity are not available to us).
func (s *Service) AddPrincipal(kind protocol.ActorKind, id string, keys ...protocol.VerifyingKey) error {
	if kind != protocol.ActorHuman && kind != protocol.ActorService {
		return errors.New("authority: principals are humans or services; agents register an Agent Card")
	}
	r := &principalRecord{ID: id, Kind: kind}
	for _, k := range keys {
		if !protocol.KeyBelongsTo(k.KeyID, kind, id) {
			return errors.New("authority: key " + k.KeyID + " does not belong to " + id)
		}
		r.Keys = append(r.Keys, k.Encode())
	}
	err := s.db.Update(func(tx logstore.Tx) error {
		return putJSON(tx.Bucket(bucketOrg).Bucket(bucketHumans), []byte(string(kind)+":"+id), r)
	})
	if err != nil {
		return err
	}
	o := s.org
	o.mu.Lock()
	defer o.mu.Unlock()
	if kind == protocol.ActorService {
		o.policy[id] = r
	} else {
		o.humans[id] = r
	}
	for _, k := range r.Keys {
		o.addKey(k)
	}
	return nil
}

// SessionEpoch is an agent's current session epoch (0 before its first
// session_open).
func (s *Service) SessionEpoch(agentID string) uint64 { return s.org.sessionEpoch(agentID) }

// SessionReplaced returns a channel closed once epoch is no longer the
// agent's current session epoch (wss.Backend): the server then ends every
// connection that said HELLO at epoch.
func (s *Service) SessionReplaced(agentID string, epoch uint64) <-chan struct{} {
	o := s.org
	o.mu.Lock()
	defer o.mu.Unlock()
	if a := o.agents[agentID]; a == nil || a.SessionEpoch != epoch {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch := o.replaced[agentID]
	if ch == nil {
		ch = make(chan struct{})
		o.replaced[agentID] = ch
	}
	return ch
}

// AgentCard returns a registered agent's card.
func (s *Service) AgentCard(agentID string) (protocol.AgentCard, bool) {
	a := s.org.agent(agentID)
	if a == nil {
		return protocol.AgentCard{}, false
	}
	return a.Card, true
}

// AgentCardHash is the digest of a registered agent's card as registered
// (what session_open names); "" for an unknown agent.
func (s *Service) AgentCardHash(agentID string) string {
	a := s.org.agent(agentID)
	if a == nil {
		return ""
	}
	return a.CardHash
}

// submit decides the Organization bootstrap commands.
func (o *org) submit(c *call) (*protocol.Receipt, error) {
	s := o.s
	s.orgMu.Lock()
	defer s.orgMu.Unlock()
	if err := s.checkActionID(c); err != nil {
		var r errReplay
		if errors.As(err, &r) {
			return &r.receipt, nil
		}
		return nil, err
	}
	if c.cmd.Actor.Kind != protocol.ActorAgent && !o.registersForOrg(c) {
		return nil, protocol.Forbidden("%s is an agent's own command (an agent card may also be registered by a registered policy service)", c.cmd.Type)
	}
	// No Group pins a profile for an Organization command.
	if err := s.profiles.checkExtensions(c, nil); err != nil {
		return nil, err
	}
	switch p := c.payload.(type) {
	case *protocol.RegisterAgentCardPayload:
		return o.register(c, p)
	case *protocol.OpenSessionPayload:
		return o.openSession(c, p)
	}
	return nil, protocol.InvalidCommand("%s is not an Organization command", c.cmd.Type)
}

// registersForOrg reports whether c is the Organization's registration of
// an agent card: agent_card_register signed by a registered policy service
// (`mwp-worker authority enroll`), the way in under closed registration.
func (o *org) registersForOrg(c *call) bool {
	return c.cmd.Type == protocol.CmdAgentCardRegister && c.cmd.Actor.Kind == protocol.ActorService && o.isPolicyService(c.cmd.Actor.ID)
}

func (o *org) register(c *call, p *protocol.RegisterAgentCardPayload) (*protocol.Receipt, error) {
	card := p.AgentCard
	byOrg := o.registersForOrg(c)
	if !byOrg && card.AgentID != c.cmd.Actor.ID {
		return nil, protocol.Forbidden("agent %s cannot register the card of %s", c.cmd.Actor.ID, card.AgentID).At("/payload/agentCard/agentId")
	}
	if card.MaxConcurrency == 0 {
		return nil, protocol.InvalidCommand("maxConcurrency must be at least 1").At("/payload/agentCard/maxConcurrency")
	}
	raw, err := protocol.Marshal(card)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "agent card: %v", err)
	}
	doc, _ := protocol.Parse(raw, protocol.DecodeOptions{})
	cardKeys := protocol.KeySet{}
	for _, k := range card.Keys {
		vk, err := protocol.DecodePublicKey(k)
		if err != nil || !protocol.KeyBelongsTo(vk.KeyID, protocol.ActorAgent, card.AgentID) {
			return nil, protocol.InvalidCommand("agent card key %s does not belong to %s", k.KeyID, card.AgentID).At("/payload/agentCard/keys")
		}
		cardKeys[vk.KeyID] = vk.Key
	}
	if err := protocol.Verify(doc.(map[string]any), cardKeys); err != nil {
		return nil, err
	}
	prev := o.agent(card.AgentID)
	if _, ok := cardKeys[c.cmd.Signature.KeyID]; !ok && prev == nil && !byOrg {
		return nil, protocol.Errorf(protocol.CodeAuthInvalidSignature, "the command must be signed by a key of the card it registers").At("/signature/keyId")
	}
	rec := &agentRecord{Card: card, CardHash: protocol.Digest(raw)}
	if prev != nil {
		rec.SessionEpoch = prev.SessionEpoch
	}
	ev := &protocol.Event{EventID: newEventID(), Type: protocol.EvtAgentCardRegistered, Actor: c.cmd.Actor, CausationID: c.cmd.ActionID,
		CorrelationID: c.cmd.CorrelationID, OccurredAt: protocol.NewTime(c.now), AcceptedBy: o.s.cfg.ID,
		Extensions: protocol.Relayed(c.cmd.Extensions, protocol.KnownExtension)}
	ev.Payload, _ = json.Marshal(group.AgentCardRegistered{AgentCard: card, AgentCardHash: rec.CardHash})
	return o.commit(c, ev, func(tx logstore.Tx) error {
		return putJSON(tx.Bucket(bucketOrg).Bucket(bucketAgents), []byte(card.AgentID), rec)
	}, func() {
		o.agents[card.AgentID] = rec
		for _, k := range card.Keys {
			o.addKey(k)
		}
	}, nil)
}

// openSession increments the agent's session epoch; a replacement session
// revokes every active execution lease of the agent and returns those
// WorkItems to queued in the same transaction, before the new session can
// act (spec 11.3).
func (o *org) openSession(c *call, p *protocol.OpenSessionPayload) (*protocol.Receipt, error) {
	a := o.agent(c.cmd.Actor.ID)
	if a == nil || p.AgentID != c.cmd.Actor.ID {
		return nil, protocol.Forbidden("agent %s has no registered Agent Card", p.AgentID).At("/payload/agentId")
	}
	if p.SessionEpoch != a.SessionEpoch+1 {
		return nil, protocol.WithDetails(protocol.Errorf(protocol.CodeAuthStaleSession, "session epoch %d: the next session of %s is %d", p.SessionEpoch, p.AgentID, a.SessionEpoch+1).At("/payload/sessionEpoch"), "sessionEpoch", a.SessionEpoch)
	}
	if p.AgentCardHash != a.CardHash {
		return nil, protocol.InvalidCommand("agentCardHash %s is not the registered card's %s", p.AgentCardHash, a.CardHash).At("/payload/agentCardHash")
	}
	rec := *a
	rec.SessionEpoch = p.SessionEpoch
	ev := &protocol.Event{EventID: newEventID(), Type: protocol.EvtSessionOpened, Actor: c.cmd.Actor, CausationID: c.cmd.ActionID,
		CorrelationID: c.cmd.CorrelationID, OccurredAt: protocol.NewTime(c.now), AcceptedBy: o.s.cfg.ID,
		Extensions: protocol.Relayed(c.cmd.Extensions, protocol.KnownExtension)}
	ev.Payload, _ = json.Marshal(p)

	// Lock every Group in id order, revoke, and write everything at once.
	s := o.s
	ids := s.GroupIDs()
	sort.Strings(ids)
	var revoked []*groupRevocation
	for _, id := range ids {
		gs := s.peekGroup(id)
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		if gs.archived {
			continue // it takes no more events
		}
		out, err := gs.g.RevokeSession(p.AgentID, p.SessionEpoch, c.now)
		if err != nil {
			return nil, err
		}
		if len(out.Events) > 0 {
			rp := &pending{now: protocol.NewTime(c.now), drafts: out.Events}
			rp.leases = s.trackLeases(gs, out.Events, c.now)
			gs.counts.touch(gs.g.Items, out.Events)
			revoked = append(revoked, &groupRevocation{gs: gs, p: rp})
		}
	}
	r, err := o.commit(c, ev, func(tx logstore.Tx) error {
		return putJSON(tx.Bucket(bucketOrg).Bucket(bucketAgents), []byte(p.AgentID), &rec)
	}, func() {
		o.agents[p.AgentID] = &rec
		// Before the revocations are announced: no connection of the old
		// session should stream them.
		if ch := o.replaced[p.AgentID]; ch != nil {
			close(ch)
			delete(o.replaced, p.AgentID)
		}
	}, revoked)
	if err == nil {
		if p.SessionEpoch > 1 {
			s.log.Info("session replaced", "agent", p.AgentID, "sessionEpoch", p.SessionEpoch, "groupsRevoked", len(revoked))
		} else {
			s.log.Info("session opened", "agent", p.AgentID, "sessionEpoch", p.SessionEpoch)
		}
	}
	return r, err
}

type groupRevocation struct {
	gs     *groupState
	p      *pending
	events []sealed
}

// commit signs and stores an Organization event, applies write in the same
// transaction together with any Group revocations, then updates memory.
func (o *org) commit(c *call, ev *protocol.Event, write func(logstore.Tx) error, apply func(), revoked []*groupRevocation) (*protocol.Receipt, error) {
	s := o.s
	raw, err := signEvent(ev, s.key)
	if err != nil {
		if len(revoked) > 0 {
			s.writer.fail(err) // the revocations are already in memory
		}
		return nil, err
	}
	receipt := &protocol.Receipt{ActionID: c.cmd.ActionID, Events: protocol.List[protocol.EventRef]{{EventID: ev.EventID}}}
	auto := &call{s: s, cmd: c.cmd, now: c.now, automatic: true}
	recs := make([]*recorder, len(revoked))
	for i, r := range revoked {
		r.events, _, err = s.seal(auto, r.gs.id, r.gs.last, r.p.drafts)
		if err != nil {
			s.writer.fail(err)
			return nil, err
		}
		recs[i] = &recorder{}
		if err := recs[i].putEvents(r.events, &r.gs.tail); err != nil {
			s.writer.fail(err)
			return nil, protocol.Errorf(protocol.CodeInternalError, "encode state: %v", err)
		}
		if err := s.writeGroup(recs[i], r.gs, r.p, r.events); err != nil {
			s.writer.fail(err)
			return nil, protocol.Errorf(protocol.CodeInternalError, "encode state: %v", err)
		}
	}
	rval, err := json.Marshal(receiptRecord{Digest: c.digest, Receipt: *receipt})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "encode receipt: %v", err)
	}
	rkey := receiptKey(c.cmd.Actor, c.cmd.ActionID)
	s.receipts.begin(rkey, c.digest, receipt)
	err = <-s.writer.submit(func(tx logstore.Tx) error {
		org := tx.Bucket(bucketOrg).Bucket(bucketEvents)
		n, err := org.NextSequence()
		if err != nil {
			return err
		}
		if err := org.Put(seqKey(n), raw); err != nil {
			return err
		}
		if err := write(tx); err != nil {
			return err
		}
		for i, r := range revoked {
			gb, err := openGroupBuckets(tx, r.gs.id, true)
			if err != nil {
				return err
			}
			if err := recs[i].apply(gb); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketReceipts).Put(rkey, rval); err != nil {
			return err
		}
		if !s.retentionOn() {
			return nil
		}
		return tx.Bucket(bucketReceiptsDue).Put(dueKey(c.now.Add(s.receiptWindow()), rkey), nil)
	})
	s.receipts.end(rkey, err)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "append: %v", err)
	}
	o.mu.Lock()
	apply()
	o.mu.Unlock()
	for _, r := range revoked {
		r.gs.last = *r.events[len(r.events)-1].ev.Sequence
		r.gs.notify()
	}
	return receipt, nil
}

// Hello checks a HELLO frame's proof (docs/wire.md): signature by a key of the
// agent, freshness, a nonce never seen before, and the session epoch.
func (s *Service) Hello(_ context.Context, h *protocol.Hello) (uint64, error) {
	if h.Proof == nil {
		return 0, protocol.Errorf(protocol.CodeAuthInvalidSignature, "HELLO needs a signed proof").At("/proof")
	}
	pr := h.Proof
	// A proof naming another agent or session epoch than the frame, an
	// unknown agent, a key not its own, a bad signature and a stale
	// issuedAt get the same answer: a HELLO must not tell which agents
	// exist (the wrong-key answer would otherwise confirm one).
	refused := protocol.Errorf(protocol.CodeAuthInvalidSignature,
		"HELLO proof not accepted: unknown agent, a key not its own, a bad signature or an issuedAt outside the clock skew").At("/proof")
	if pr.AgentID != h.AgentID || pr.SessionEpoch != h.SessionEpoch {
		return 0, refused
	}
	a := s.org.agent(h.AgentID)
	if a == nil {
		return 0, refused
	}
	raw, err := protocol.Marshal(pr)
	if err != nil {
		return 0, refused
	}
	doc, _ := protocol.Parse(raw, protocol.DecodeOptions{})
	now := s.clock.Now()
	skew := s.skew()
	if err := protocol.VerifyFresh(doc.(map[string]any), s.org, now, skew); err != nil {
		return 0, refused
	}
	if !protocol.KeyBelongsTo(pr.Signature.KeyID, protocol.ActorAgent, h.AgentID) {
		return 0, refused
	}
	if err := s.useNonce(h.AgentID, pr.Nonce, now, skew); err != nil {
		return 0, err
	}
	if h.SessionEpoch != a.SessionEpoch {
		return 0, protocol.WithDetails(protocol.Errorf(protocol.CodeAuthStaleSession, "session epoch %d of %s is not the current %d", h.SessionEpoch, h.AgentID, a.SessionEpoch).At("/sessionEpoch"), "sessionEpoch", a.SessionEpoch)
	}
	return a.SessionEpoch, nil
}
