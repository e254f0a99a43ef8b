package runtime

import (
	"context"
	"path/filepath"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/slots"
)

// clarifyAsk is one question to the slow clarifiers (slots.OfferClarifier)
// about an offer's contract at a revision: pending until they answer, then
// their questions or the failure, kept until admission has used them.
type clarifyAsk struct {
	offerID   string
	revision  uint64
	pending   bool
	questions []string
	err       error
}

// msgClarified is the answer to a clarifyAsk.
type msgClarified struct {
	key       itemKey
	offerID   string
	revision  uint64
	questions []string
	err       error
}

// offerClarifiers are the handlers that would run the contract and must be
// asked about it off the loop.
func (e *engine) offerClarifiers(c protocol.WorkContract) []slots.OfferClarifier {
	var out []slots.OfferClarifier
	for _, h := range e.handlersFor(c) {
		if oc, ok := h.(slots.OfferClarifier); ok {
			out = append(out, oc)
		}
	}
	return out
}

// askedAbout returns what the slow clarifiers said about the offer's
// contract; ready is false while they have not answered (asked now if
// nobody has asked them yet), and admission waits: sync runs again when
// the answer comes.
func (e *engine) askedAbout(k itemKey, en queue.Entry, c protocol.WorkContract) (questions []string, err error, ready bool) {
	ocs := e.offerClarifiers(c)
	if len(ocs) == 0 {
		return nil, nil, true
	}
	if a := e.clarify[k]; a != nil && a.offerID == en.Offer.OfferID && a.revision == en.ContractRevision {
		if a.pending {
			return nil, nil, false
		}
		delete(e.clarify, k) // used now; a later judgement asks again
		return a.questions, a.err, true
	}
	e.clarify[k] = &clarifyAsk{offerID: en.Offer.OfferID, revision: en.ContractRevision, pending: true}
	q := slots.ClarifyRequest{GroupID: k.group, MissionID: en.MissionID, WorkItemID: k.id, OfferID: en.Offer.OfferID,
		Contract: c, Extensions: e.offerExtensions(k, en), Dir: filepath.Join(e.cfg.Dir, "work")}
	e.log.Debug("asking the handlers about an offered contract", "item", k.sched(), "offer", q.OfferID, "contractRevision", en.ContractRevision)
	go func(ctx context.Context) {
		m := msgClarified{key: k, offerID: q.OfferID, revision: en.ContractRevision}
		for _, oc := range ocs {
			qs, err := oc.ClarifyOffer(ctx, q)
			m.questions = append(m.questions, qs...)
			if err != nil {
				m.err = err
				break
			}
		}
		e.mb.post(m)
	}(e.sendCtx)
	return nil, nil, false
}

// onClarified records the answer and judges the offer with it, when it
// still answers the offer the item has.
func (e *engine) onClarified(m msgClarified) {
	a := e.clarify[m.key]
	if a == nil || !a.pending || a.offerID != m.offerID || a.revision != m.revision {
		return // asked about an offer that has since changed; that one is asked anew
	}
	a.pending, a.questions, a.err = false, m.questions, m.err
	e.sync(m.key)
	if a := e.clarify[m.key]; a != nil && !a.pending {
		delete(e.clarify, m.key) // the offer is gone or judged already
	}
}
