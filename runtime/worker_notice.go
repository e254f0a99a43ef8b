package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// notices is the engine's notice state; the loop goroutine owns it.
type notices struct {
	store     *noticeStore
	budget    noticeBudget
	queue     []noticeRecord          // decided; waiting to be online and for a token
	sending   map[string]noticeRecord // in flight, by messageId
	baselines map[itemKey]baseline    // last disclosure published per waiting item
	due       map[itemKey]time.Time   // a material change waits until then
	// dirty: a scheduling decision may have moved the waiting items'
	// estimates; they are compared once at the end of the step.
	dirty bool
	off   bool
}

// msgNoticeSent is the authority's answer to a notice.
type msgNoticeSent struct {
	messageID string
	err       error
}

// maxNoticeQueue bounds the notices waiting for the connection or a token;
// beyond it the oldest is dropped.
const maxNoticeQueue = 256

func newNotices(db *bolt.DB, cfg WorkerConfig, now time.Time) (*notices, error) {
	st, err := openNoticeStore(db, now)
	if err != nil {
		return nil, err
	}
	pend, err := st.pending()
	if err != nil {
		return nil, err
	}
	bl, err := st.baselines()
	if err != nil {
		return nil, err
	}
	return &notices{
		store: st, budget: newNoticeBudget(cfg.NoticeBurst, cfg.NoticeEvery, now),
		queue: pend, sending: map[string]noticeRecord{}, baselines: bl, due: map[itemKey]time.Time{},
		dirty: true, off: cfg.NoticeBurst < 0,
	}, nil
}

// scheduleChanged marks the waiting items' disclosures for a re-check.
func (e *engine) scheduleChanged() { e.notes.dirty = true }

// noticeRefusal posts, once per offer, why admission refused it.
func (e *engine) noticeRefusal(k itemKey, en queue.Entry, rej protocol.AdmissionRejection, now time.Time) {
	obj := RejectionNotice{Kind: NoticeRejection, GroupID: k.group, WorkItemID: k.id, OfferID: en.Offer.OfferID,
		Reason: rej.Reason, Detail: withoutForeignGroups(rej.Detail, k.group, e.store.GroupIDs())}
	e.postRefusal(k, en, obj, rejectionKey(obj.OfferID), now)
}

// noticeRenewalRefusal tells the Group why this worker releases an item
// whose revised contract it refused (spec 10.1): once per revision.
func (e *engine) noticeRenewalRefusal(k itemKey, en queue.Entry, offerID string, rev uint64, rej protocol.AdmissionRejection, now time.Time) {
	obj := RejectionNotice{Kind: NoticeRejection, GroupID: k.group, WorkItemID: k.id, OfferID: offerID, ContractRevision: rev,
		Reason: rej.Reason, Detail: withoutForeignGroups(rej.Detail, k.group, e.store.GroupIDs())}
	e.postRefusal(k, en, obj, renewalRejectionKey(offerID, rev), now)
}

func (e *engine) postRefusal(k itemKey, en queue.Entry, obj RejectionNotice, key string, now time.Time) {
	e.postOnce(k, en, NoticeRejection, obj.OfferID, rejectionLine(obj), obj, key, now)
}

// noticeAmbiguity raises a handler's questions about an offered contract
// in the WorkItem's conversation (spec 10.1), once per offer and revision.
func (e *engine) noticeAmbiguity(k itemKey, en queue.Entry, questions []string, now time.Time) {
	obj := AmbiguityNotice{Kind: NoticeAmbiguity, GroupID: k.group, WorkItemID: k.id, OfferID: en.Offer.OfferID,
		ContractRevision: en.ContractRevision, Questions: questions}
	line := fmt.Sprintf("Offer %s for %s not accepted: the contract (revision %d) is ambiguous — %s", obj.OfferID, obj.WorkItemID,
		obj.ContractRevision, strings.Join(questions, "; "))
	e.postOnce(k, en, NoticeAmbiguity, obj.OfferID, line, obj, ambiguityKey(obj.OfferID, obj.ContractRevision), now)
}

// postOnce posts a notice of kind about an offer unless one with the same
// key was decided before (a restart judges the offer again: the first
// notice stands).
func (e *engine) postOnce(k itemKey, en queue.Entry, kind, offerID, line string, obj any, key string, now time.Time) {
	if e.notes.off {
		return
	}
	msgID, actID := noticeIDs(e.cfg.AgentID, k.group, kind, key)
	if r, found, err := e.notes.store.get(msgID); err != nil {
		e.log.Error("read notice record", "message", msgID, "err", err)
	} else if found {
		e.log_.notice(NoticeLog{Kind: r.Kind, GroupID: k.group, WorkItemID: k.id, OfferID: offerID, MessageID: msgID,
			State: noticeSkipped, Why: "already " + r.State, At: now})
		return
	}
	raw, err := protocol.Marshal(obj)
	if err != nil {
		e.log.Error(kind+" notice", "item", k.sched(), "err", err)
		return
	}
	e.decideNotice(noticeRecord{Kind: kind, GroupID: k.group, WorkItemID: k.id, OfferID: offerID,
		MissionID: en.MissionID, MessageID: msgID, ActionID: actID, Text: noticeText(line, raw), Object: raw,
		State: noticePending, At: now}, now)
}

// noticeAccepted keeps the disclosure sent in work.accept_offer as the
// item's baseline: it counts as published.
func (e *engine) noticeAccepted(k itemKey, d protocol.ScheduleDisclosure, now time.Time) {
	if e.notes.off {
		return
	}
	e.setBaseline(k, baseline{Disclosure: d, PublishedAt: now})
}

func (e *engine) setBaseline(k itemKey, b baseline) {
	e.notes.baselines[k] = b
	if err := e.notes.store.putBaseline(k, b); err != nil {
		e.log.Error("store disclosure baseline", "item", k.sched(), "err", err)
	}
}

func (e *engine) dropBaseline(k itemKey) {
	delete(e.notes.baselines, k)
	delete(e.notes.due, k)
	if err := e.notes.store.deleteBaseline(k); err != nil {
		e.log.Error("delete disclosure baseline", "item", k.sched(), "err", err)
	}
}

// stepNotices re-checks disclosures after scheduling decisions (and those
// whose update was deferred, when due), then sends what may go out.
func (e *engine) stepNotices(now time.Time) {
	n := e.notes
	if n.off {
		return
	}
	if n.dirty || len(n.due) > 0 {
		e.recheck(now, n.dirty)
		n.dirty = false
	}
	e.flushNotices(now)
}

// recheck compares the waiting items' disclosures with the last ones
// published: all of them after a scheduling decision, else only those
// deferred and due. Disclose reads only the item's own Group and
// aggregate load (spec 11.2), so an update names no other Group.
func (e *engine) recheck(now time.Time, all bool) {
	n := e.notes
	thr := e.cfg.DisclosureThreshold
	for k, b := range n.baselines {
		it := e.items[k]
		if it == nil || (it.Phase != phQueued && it.Phase != phAccepting) {
			e.dropBaseline(k) // started, or no longer ours: updates end
			continue
		}
		due, deferred := n.due[k]
		if it.Phase != phQueued || !it.inSched || (!all && (!deferred || now.Before(due))) {
			continue
		}
		d, err := e.sched.Disclose(k.sched(), now)
		if err != nil {
			continue
		}
		next := wireDisclosure(d, now)
		material, why := MaterialChange(b.Disclosure, next, thr)
		switch {
		case !material:
			delete(n.due, k)
		case now.Before(b.PublishedAt.Add(thr)):
			n.due[k] = b.PublishedAt.Add(thr) // one update per item per threshold
		case e.mon.State() != stateOnline || len(n.queue) > 0 || n.budget.nextAt(now).After(now):
			// Sent when it can go at once, so it is never stale; the
			// return online re-checks every item anyway.
			n.due[k] = now.Add(e.cfg.Tick)
			if t := n.budget.nextAt(now); t.After(n.due[k]) {
				n.due[k] = t
			}
		default:
			delete(n.due, k)
			e.noticeDisclosure(it, next, why, now)
		}
	}
}

func (e *engine) noticeDisclosure(it *item, d protocol.ScheduleDisclosure, why string, now time.Time) {
	k := it.key
	obj := DisclosureNotice{Kind: NoticeDisclosure, GroupID: k.group, WorkItemID: k.id, ScheduleDisclosure: d}
	raw, err := protocol.Marshal(obj)
	if err != nil {
		e.log.Error("disclosure notice", "item", k.sched(), "err", err)
		return
	}
	msgID, actID := noticeIDs(e.cfg.AgentID, k.group, NoticeDisclosure, disclosureKey(k.id, d.ComputedAt.Time))
	e.setBaseline(k, baseline{Disclosure: d, PublishedAt: now})
	e.decideNotice(noticeRecord{Kind: NoticeDisclosure, GroupID: k.group, WorkItemID: k.id, OfferID: it.OfferID,
		MissionID: it.missionID, MessageID: msgID, ActionID: actID, Text: noticeText(disclosureLine(obj, why), raw), Object: raw,
		Why: why, State: noticePending, At: now}, now)
}

// decideNotice records a notice durably as pending and queues it.
func (e *engine) decideNotice(r noticeRecord, now time.Time) {
	n := e.notes
	if err := n.store.put(r); err != nil {
		e.log.Error("store notice record", "message", r.MessageID, "err", err)
	}
	e.log_.notice(noticeLogOf(r))
	n.queue = append(n.queue, r)
	if len(n.queue) > maxNoticeQueue {
		old := n.queue[0]
		n.queue = n.queue[1:]
		e.settleNotice(old, noticeDropped, "too many notices waiting")
	}
	e.flushNotices(now)
}

// flushNotices sends queued notices while online and the budget allows.
func (e *engine) flushNotices(now time.Time) {
	n := e.notes
	for len(n.queue) > 0 && e.mon.State() == stateOnline && e.fatal == nil && n.budget.take(now) {
		r := n.queue[0]
		n.queue = n.queue[1:]
		e.sendNotice(r, now)
	}
}

func (e *engine) sendNotice(r noticeRecord, now time.Time) {
	mepoch, member := e.members[r.GroupID]
	if !member {
		e.settleNotice(r, noticeDropped, "not a member of the Group")
		return
	}
	env := protocol.Envelope{GroupID: r.GroupID, SessionEpoch: protocol.Uint64(e.sess.epoch), MembershipEpoch: protocol.Uint64(mepoch),
		CorrelationID: r.MissionID, ActionID: r.ActionID,
		Extensions: protocol.Extensions{NoticeExtensionURI: {Critical: false, Data: r.Object}}}
	p := &protocol.PostMessagePayload{MessageID: r.MessageID, ConversationID: r.WorkItemID, Text: r.Text, MediaType: "text/markdown"}
	_, raw, err := protocol.BuildCommand(e.w.actor(), e.cfg.Key, protocol.CmdMessagePost, env, p, now)
	if err != nil {
		e.settleNotice(r, noticeDropped, err.Error())
		return
	}
	e.notes.sending[r.MessageID] = r
	go func() {
		_, err := e.client.SendAdvisory(e.sendCtx, raw)
		e.mb.post(msgNoticeSent{messageID: r.MessageID, err: err})
	}()
}

// onNoticeSent settles a notice by the answer. A refusal is final, never
// retried (RATE_LIMITED included); a used actionId means this notice is
// already in the log (sent before a restart). Only a send cut short by
// shutdown leaves it pending, for the next start.
func (e *engine) onNoticeSent(m msgNoticeSent) {
	r, ok := e.notes.sending[m.messageID]
	if !ok {
		return
	}
	delete(e.notes.sending, m.messageID)
	switch {
	case m.err == nil:
		e.settleNotice(r, noticePosted, "")
	case protocol.CodeOf(m.err) == protocol.CodeActionIDCollision:
		e.settleNotice(r, noticePosted, "already in the log")
	case errors.Is(m.err, context.Canceled) || errors.Is(m.err, client.ErrNotRunning):
		e.log.Info("notice left for the next start", "message", r.MessageID, "err", m.err)
	default:
		e.settleNotice(r, noticeDropped, m.err.Error())
	}
}

func (e *engine) settleNotice(r noticeRecord, state, why string) {
	r.State, r.Err = state, why
	if err := e.notes.store.put(r); err != nil {
		e.log.Error("store notice record", "message", r.MessageID, "err", err)
	}
	e.log_.noticeState(r.MessageID, state, why)
	if state == noticePosted {
		e.log.Info("notice posted", "kind", r.Kind, "item", itemKey{r.GroupID, r.WorkItemID}.sched(), "message", r.MessageID, "note", why)
	} else {
		e.log.Warn("notice dropped", "kind", r.Kind, "item", itemKey{r.GroupID, r.WorkItemID}.sched(), "message", r.MessageID, "why", why)
	}
}

func noticeLogOf(r noticeRecord) NoticeLog {
	return NoticeLog{Kind: r.Kind, GroupID: r.GroupID, WorkItemID: r.WorkItemID, OfferID: r.OfferID, MessageID: r.MessageID,
		State: r.State, Why: r.Why, Err: r.Err, At: r.At}
}
