package group

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// Messages (spec 12): posted, corrected, retracted or redacted, never
// authorizing anything whatever their text says. Only the author changes a
// message; the MissionOwner may also redact it; a retracted or redacted
// message stays so.

// Message is what the decisions remember of a message: its author,
// revision, state and conversation.
type Message struct {
	Author         protocol.Actor
	Revision       uint64
	State          string
	ConversationID string
}

// Messages are a Group's messages by id.
type Messages map[string]*Message

// messageState is the state each message event leaves.
var messageState = map[protocol.EventType]string{
	protocol.EvtMessagePosted:    "posted",
	protocol.EvtMessageCorrected: "corrected",
	protocol.EvtMessageRetracted: "retracted",
	protocol.EvtMessageRedacted:  "redacted",
}

// DecideMessage decides message.post, message.correct, message.retract and
// message.redact and returns the event to append; ms is left as it was.
func (ms Messages) DecideMessage(g *Group, in Input) (EventDraft, error) {
	ev := &MessageEvent{Author: in.Actor}
	var typ protocol.EventType
	switch pl := in.Payload.(type) {
	case *protocol.PostMessagePayload:
		if _, dup := ms[pl.MessageID]; dup {
			return EventDraft{}, protocol.InvalidCommand("message %s already exists", pl.MessageID).At("/payload/messageId")
		}
		typ = protocol.EvtMessagePosted
		ev.MessageID, ev.ConversationID, ev.Text, ev.MediaType, ev.ReplyTo, ev.Artifacts = pl.MessageID, pl.ConversationID, pl.Text, pl.MediaType, pl.ReplyTo, pl.Artifacts
	case *protocol.CorrectMessagePayload:
		typ = protocol.EvtMessageCorrected
		ev.MessageID, ev.Text, ev.Reason = pl.MessageID, pl.Text, pl.Reason
	case *protocol.RetractMessagePayload:
		typ = protocol.EvtMessageRetracted
		ev.MessageID, ev.Reason = pl.MessageID, pl.Reason
	case *protocol.RedactMessagePayload:
		typ = protocol.EvtMessageRedacted
		ev.MessageID, ev.Reason = pl.MessageID, pl.Reason
	default:
		return EventDraft{}, protocol.Errorf(protocol.CodeInvalidCommand, "%s: payload is %T", in.Type, in.Payload)
	}
	ev.State = messageState[typ]
	id, rec := ev.MessageID, ms[ev.MessageID]
	if typ != protocol.EvtMessagePosted {
		if rec == nil {
			return EventDraft{}, protocol.InvalidCommand("message %s not found", id).At("/payload/messageId")
		}
		if rec.State == "retracted" || rec.State == "redacted" {
			return EventDraft{}, protocol.InvalidTransition("message %s is %s", id, rec.State)
		}
		owner := g.Mission != nil && in.Actor == g.Mission.Owner
		if rec.Author != in.Actor && !(typ == protocol.EvtMessageRedacted && owner) {
			return EventDraft{}, protocol.Forbidden("only the author may change message %s (the MissionOwner may redact it)", id)
		}
	}
	var cur uint64
	if rec != nil {
		cur = rec.Revision
	}
	if err := CheckRevision(in.ExpectedRevision, protocol.AggregateMessage, id, cur); err != nil {
		return EventDraft{}, err
	}
	return EventDraft{Type: typ, Aggregate: protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id}, Revision: cur + 1, Actor: in.Actor, Payload: ev}, nil
}

// Notice drafts a message the authority posts on its own (a policy notice),
// or nothing when a message of that id exists: a notice is told once.
func (ms Messages) Notice(id, conversation, text string) []EventDraft {
	if _, dup := ms[id]; dup {
		return nil
	}
	return []EventDraft{{Type: protocol.EvtMessagePosted, Aggregate: protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id},
		Revision: 1, Actor: AuthorityActor, Payload: &MessageEvent{MessageID: id, ConversationID: conversation,
			Author: AuthorityActor, Text: text, MediaType: "text/plain", State: "posted"}}}
}

// Fold applies one message event: typ on message id by actor, leaving
// revision rev; conversation is the posted event's. The first event of a
// message names its author.
func (ms Messages) Fold(typ protocol.EventType, id string, actor protocol.Actor, rev uint64, conversation string) {
	rec := ms[id]
	if rec == nil {
		rec = &Message{Author: actor}
		if typ == protocol.EvtMessagePosted {
			rec.ConversationID = conversation
		}
		ms[id] = rec
	}
	rec.Revision, rec.State = rev, messageState[typ]
}

// FoldAll applies the message events among ds.
func (ms Messages) FoldAll(ds []EventDraft) {
	for _, d := range ds {
		if d.Aggregate.Kind != protocol.AggregateMessage {
			continue
		}
		var conv string
		if ev, ok := d.Payload.(*MessageEvent); ok {
			conv = ev.ConversationID
		}
		ms.Fold(d.Type, d.Aggregate.ID, d.Actor, d.Revision, conv)
	}
}
