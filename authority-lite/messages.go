package authoritylite

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"golang.org/x/time/rate"
)

// messageRecord tracks who wrote a message and its revision, rebuilt from
// the log on open.
type messageRecord struct {
	Author         protocol.Actor
	Revision       uint64
	State          string
	ConversationID string
}

func (s *Service) message(c *call, gs *groupState, p *pending) error {
	msgs := s.messages(gs)
	ev := &group.MessageEvent{Author: c.cmd.Actor}
	var typ protocol.EventType
	var id string
	switch pl := c.payload.(type) {
	case *protocol.PostMessagePayload:
		if _, dup := msgs[pl.MessageID]; dup {
			return protocol.InvalidCommand("message %s already exists", pl.MessageID).At("/payload/messageId")
		}
		id, typ = pl.MessageID, protocol.EvtMessagePosted
		ev.ConversationID, ev.Text, ev.MediaType, ev.ReplyTo, ev.Artifacts, ev.State = pl.ConversationID, pl.Text, pl.MediaType, pl.ReplyTo, pl.Artifacts, "posted"
	case *protocol.CorrectMessagePayload:
		id, typ = pl.MessageID, protocol.EvtMessageCorrected
		ev.Text, ev.Reason, ev.State = pl.Text, pl.Reason, "corrected"
	case *protocol.RetractMessagePayload:
		id, typ = pl.MessageID, protocol.EvtMessageRetracted
		ev.Reason, ev.State = pl.Reason, "retracted"
	case *protocol.RedactMessagePayload:
		id, typ = pl.MessageID, protocol.EvtMessageRedacted
		ev.Reason, ev.State = pl.Reason, "redacted"
	}
	ev.MessageID = id
	rec := msgs[id]
	if typ != protocol.EvtMessagePosted {
		if rec == nil {
			return protocol.InvalidCommand("message %s not found", id).At("/payload/messageId")
		}
		if rec.State == "retracted" || rec.State == "redacted" {
			return protocol.InvalidTransition("message %s is %s", id, rec.State)
		}
		owner := gs.g.Mission != nil && c.cmd.Actor == gs.g.Mission.Owner
		if rec.Author != c.cmd.Actor && !(typ == protocol.EvtMessageRedacted && owner) {
			return protocol.Forbidden("only the author may change message %s (the MissionOwner may redact it)", id)
		}
	}
	if err := s.checkMessageRevision(c, rec, id); err != nil {
		return err
	}
	next := &messageRecord{Author: c.cmd.Actor, Revision: 1, State: ev.State, ConversationID: ev.ConversationID}
	if rec != nil {
		next = &messageRecord{Author: rec.Author, Revision: rec.Revision + 1, State: ev.State, ConversationID: rec.ConversationID}
	}
	msgs[id] = next
	p.drafts = append(p.drafts, group.EventDraft{Type: typ, Aggregate: protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id}, Revision: next.Revision, Actor: c.cmd.Actor, Payload: ev})
	return nil
}

func (s *Service) checkMessageRevision(c *call, rec *messageRecord, id string) error {
	if c.cmd.ExpectedRevision == nil {
		return nil
	}
	cur := uint64(0)
	if rec != nil {
		cur = rec.Revision
	}
	return group.CheckRevision(c.cmd.ExpectedRevision, protocol.AggregateMessage, id, cur)
}

// messages returns the Group's message index, rebuilding it from the log
// the first time (messages are rare next to work events).
func (s *Service) messages(gs *groupState) map[string]*messageRecord {
	if gs.msgs != nil {
		return gs.msgs
	}
	gs.msgs = map[string]*messageRecord{}
	_ = s.scanEvents(gs.id, 0, func(ev *protocol.Event, _ []byte) bool {
		if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateMessage {
			return true
		}
		rec := gs.msgs[ev.Aggregate.ID]
		state := map[protocol.EventType]string{protocol.EvtMessagePosted: "posted", protocol.EvtMessageCorrected: "corrected", protocol.EvtMessageRetracted: "retracted", protocol.EvtMessageRedacted: "redacted"}[ev.Type]
		if rec == nil {
			rec = &messageRecord{Author: ev.Actor}
			if ev.Type == protocol.EvtMessagePosted {
				var p struct {
					ConversationID string `json:"conversationId"`
				}
				_ = json.Unmarshal(ev.Payload, &p)
				rec.ConversationID = p.ConversationID
			}
			gs.msgs[ev.Aggregate.ID] = rec
		}
		rec.Revision, rec.State = ev.Rev(), state
		return true
	})
	return gs.msgs
}

// rateLimiter is a token bucket per actor (spec 20): Burst at once, then
// one every Every. The buckets are golang.org/x/time/rate limiters fed the
// authority's clock. Actors are authenticated principals, so the map is
// bounded by what the Organization registered.
type rateLimiter struct {
	mu     sync.Mutex
	Burst  int
	Every  time.Duration
	bucket map[protocol.Actor]*rate.Limiter
}

func (r *rateLimiter) allow(a protocol.Actor, now time.Time) error {
	if r == nil || r.Burst <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bucket == nil {
		r.bucket = map[protocol.Actor]*rate.Limiter{}
	}
	b := r.bucket[a]
	if b == nil {
		b = rate.NewLimiter(rate.Every(r.Every), r.Burst)
		r.bucket[a] = b
	}
	res := b.ReserveN(now, 1)
	wait := r.Every
	if res.OK() {
		if wait = res.DelayFrom(now); wait == 0 {
			return nil
		}
		res.CancelAt(now)
	}
	ms := max(1, (wait+time.Millisecond-1)/time.Millisecond)
	return protocol.WithDetails(protocol.Errorf(protocol.CodeRateLimited, "%s %s is over its rate of %d per %s", a.Kind, a.ID, r.Burst, time.Duration(r.Burst)*r.Every), "retryAfterMs", int64(ms))
}
