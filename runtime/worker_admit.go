package runtime

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/slots"
)

// admissionInput is what admission control judges an offer of item k
// (or its revised contract) on, before the scheduler's disclosure: the
// worker's card and commitments, the item's expected cost in every budget
// dimension and what the other accepted items already hold.
func (e *engine) admissionInput(k itemKey, en queue.Entry, contract protocol.WorkContract, now time.Time) lc.Admission {
	m, _ := e.store.Mission(k.group)
	committed := 0
	var held protocol.Usage
	for _, x := range e.items {
		if x.Phase != phFinishing {
			committed++
		}
		if x.key != k && x.Phase != phFinishing {
			held = held.Add(x.Cost)
		}
	}
	var want protocol.Usage
	for _, c := range contract.RequiredCapabilities {
		want = want.Add(lc.UsageOf(e.cfg.Costs[c.ID]))
	}
	est, _ := e.estimateOf(en)
	in := lc.Admission{
		UnknownCritical: e.unknownCritical(k, en),
		Now:             now, AgentID: e.cfg.AgentID, Capabilities: e.sess.card.Capabilities, Slots: int(e.cfg.Card.MaxConcurrency),
		Committed: committed, Capacity: int(e.cfg.Card.MaxConcurrency) * e.cfg.QueueDepth,
		Owner: en.Owner, OfferedToMe: en.OfferedTo(e.cfg.AgentID), Contract: contract, MissionActive: m.State == "" || m.State == protocol.MissionActive,
		EarliestStart: now, Estimate: est, Confidence: 0.5, Reliability: e.reliability,
		Expected: want, Held: held, Limits: e.cfg.Limits,
	}
	if en.Offer != nil {
		in.OfferID, in.OfferExpires = en.Offer.OfferID, en.Offer.ExpiresAt.Time
	}
	for _, d := range en.Dependencies {
		in.Dependencies = append(in.Dependencies, lc.Dependency{WorkItemID: d.WorkItemID, Policy: d.Policy, State: d.State})
	}
	return in
}

func wireDisclosure(d scheduler.Disclosure, now time.Time) protocol.ScheduleDisclosure {
	if d.ComputedAt.IsZero() {
		return protocol.ScheduleDisclosure{EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(now), To: protocol.NewTime(now)},
			EstimatedCompletion: protocol.NewTime(now), CapacityState: protocol.CapacityConstrained, ComputedAt: protocol.NewTime(now)}
	}
	return protocol.ScheduleDisclosure{
		EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(d.EstimatedStartWindow.From), To: protocol.NewTime(d.EstimatedStartWindow.To)},
		EstimatedCompletion:  protocol.NewTime(d.EstimatedCompletion), Confidence: d.Confidence,
		CapacityState: protocol.CapacityState(d.CapacityState), ComputedAt: protocol.NewTime(d.ComputedAt),
	}
}

// offerExtensions are the extensions of the event that carried the item's
// contract (the offer, or the revision); nil for a contract restored from
// a snapshot, which keeps none.
func (e *engine) offerExtensions(k itemKey, en queue.Entry) protocol.Extensions {
	raw, err := e.store.Event(k.group, en.ContractSeq)
	if err != nil {
		return nil
	}
	var ev struct {
		Extensions protocol.Extensions `json:"extensions"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return nil
	}
	return ev.Extensions
}

// unknownCritical lists the critical extensions of the event that carried
// the item's contract that this worker does not interpret.
func (e *engine) unknownCritical(k itemKey, en queue.Entry) []string {
	var out []string
	for uri, x := range e.offerExtensions(k, en) {
		if x.Critical && !protocol.KnownExtension(uri) && !slices.Contains(e.cfg.Extensions, uri) {
			out = append(out, uri)
		}
	}
	slices.Sort(out)
	return out
}

// admit runs admission control on an offer (lc.Step, Offered) and
// carries out its acceptance or refusal. An essential ambiguity (spec
// 10.1) is raised before acceptance: the handlers that would run the
// contract are asked, slow ones in the background (worker_clarify.go).
func (e *engine) admit(k itemKey, en queue.Entry, now time.Time) {
	contract, err := e.store.Contract(k.group, k.id)
	if err != nil {
		e.log.Warn("offer without a readable contract", "item", k.sched(), "err", err)
		return
	}
	o := lc.Offered{ContractRevision: en.ContractRevision, Questions: e.ambiguities(contract)}
	if len(o.Questions) == 0 && len(e.unknownCritical(k, en)) == 0 { // refused below without asking
		qs, err, ready := e.askedAbout(k, en, contract)
		if !ready {
			return // judged when the handlers answer
		}
		if err != nil {
			// The reason stays in the worker's log: a program's stderr is
			// not for the Group.
			e.log.Warn("offer refused: asking the handler about the contract failed", "item", k.sched(), "offer", en.Offer.OfferID, "err", err)
		}
		o.Questions, o.AskFailed = qs, err != nil
	}
	// The disclosure comes from the scheduler: enqueue as if accepted,
	// disclose; lc holds it until the ownership is granted.
	it := newItem(k, phAccepting, en.MissionID)
	o.Disclosure = wireDisclosure(scheduler.Disclosure{}, now)
	if len(o.Questions) == 0 && !o.AskFailed {
		e.ensureGroup(k.group)
		o.Admission = e.admissionInput(k, en, contract, now)
		if o.Admission.Committed < o.Admission.Capacity {
			e.enqueue(it, en, now)
			o.Disclosure = e.disclose(k, &o.Admission, now)
		}
	}
	next, effs := lc.Step(lc.Item{ID: k.id}, o, now)
	it.Item = next
	e.carryAdmission(it, en, effs, now)
}

// disclose is the scheduler's disclosure of an item just enqueued, which
// admission judges the deadline on.
func (e *engine) disclose(k itemKey, in *lc.Admission, now time.Time) protocol.ScheduleDisclosure {
	d, err := e.sched.Disclose(k.sched(), now)
	if err != nil {
		return wireDisclosure(scheduler.Disclosure{}, now)
	}
	in.EarliestStart, in.Completion, in.Confidence = d.EstimatedStartWindow.From, d.EstimatedCompletion, d.Confidence
	return wireDisclosure(d, now)
}

// carryAdmission carries out what lc decided of an offer or a renewal.
func (e *engine) carryAdmission(it *item, en queue.Entry, effs []lc.Effect, now time.Time) {
	k := it.key
	for _, ef := range effs {
		switch ef := ef.(type) {
		case lc.Admitted:
			e.log_.admission(AdmissionLog{GroupID: k.group, WorkItemID: k.id, OfferID: ef.OfferID, ContractRevision: ef.Revision,
				Renewal: ef.Revision != 0, Accepted: ef.Decision.Accepted(), Rejection: ef.Decision.Rejection, Basis: ef.Decision.Basis, At: now})
		case lc.Ambiguous:
			e.log.Info("offer not accepted: the contract is ambiguous", "item", k.sched(), "offer", en.Offer.OfferID,
				"contractRevision", en.ContractRevision, "questions", ef.Questions)
			e.refused[k] = lc.Refusal{OfferID: en.Offer.OfferID, Ambiguous: true, Revision: en.ContractRevision}
			e.noticeAmbiguity(k, en, ef.Questions, now)
		case lc.Declined:
			e.declined(it, en, ef, now)
		case lc.Unschedule:
			e.unschedule(it)
		case lc.Created:
			delete(e.refused, k) // judged again and taken
			e.items[k] = it
		case lc.Enqueue:
			e.enqueue(it, en, now)
		case lc.AcceptanceNoticed:
			e.noticeAccepted(k, ef.Disclosure, now) // the first publication
		default:
			e.carryItem(it, ef, now)
		}
	}
}

// declined records an offer or a renewal admission refused, and posts the
// refusal to the Group (spec 10.3 wants a structured refusal; 0.1 has no
// command for it, spec 15), once per offer (worker_notice.go).
func (e *engine) declined(it *item, en queue.Entry, d lc.Declined, now time.Time) {
	k, rej := it.key, d.Rejection
	if d.Revision != 0 {
		e.log.Warn("contract revised beyond what this worker can honour; releasing the item", "item", k.sched(),
			"contractRevision", d.Revision, "reason", rej.Reason, "detail", rej.Detail)
		e.refused[k] = lc.Refusal{OfferID: d.OfferID, Reason: rej.Reason, Revision: d.Revision}
		e.noticeRenewalRefusal(k, en, d.OfferID, d.Revision, rej, now)
		return
	}
	e.log.Info("offer refused", "item", k.sched(), "reason", rej.Reason, "detail", rej.Detail)
	e.refused[k] = lc.Refusal{OfferID: d.OfferID, Reason: rej.Reason, Capacity: e.freed}
	e.noticeRefusal(k, en, rej, now)
}

// renewAcceptance runs admission control again on the revised contract of
// an item this worker owns and has not started (lc.Step, Renewal; spec
// 10.1).
func (e *engine) renewAcceptance(it *item, en queue.Entry, now time.Time) {
	k, rev := it.key, en.ContractRevision
	contract, err := e.store.Contract(k.group, k.id)
	if err != nil {
		e.log.Warn("revised contract unreadable", "item", k.sched(), "err", err)
		it.Hold = true
		e.enqueue(it, en, now)
		return
	}
	r := lc.Renewal{Revision: rev, OfferID: en.Item.WonOfferID, AgentID: e.cfg.AgentID}
	if r.OfferID == "" {
		r.OfferID = it.OfferID
	}
	r.Admission = e.admissionInput(k, en, contract, now)
	e.enqueue(it, en, now) // not held while disclosing
	r.Disclosure = e.disclose(k, &r.Admission, now)
	var effs []lc.Effect
	it.Item, effs = lc.Step(it.core(), r, now)
	if it.Reaccepting == rev && it.Hold {
		e.log.Info("contract revised; acceptance renewed", "item", k.sched(), "contractRevision", rev)
	}
	e.carryAdmission(it, en, effs, now)
}

// ambiguities are the questions the handlers that would run the contract
// raise about it (slots.Clarifier), in handler order.
func (e *engine) ambiguities(c protocol.WorkContract) []string {
	var qs []string
	for _, h := range e.handlersFor(c) {
		if cl, ok := h.(slots.Clarifier); ok {
			qs = append(qs, cl.Clarify(c)...)
		}
	}
	return qs
}

// handlersFor are the handlers that provide one of the contract's
// required capabilities, in handler order.
func (e *engine) handlersFor(c protocol.WorkContract) []slots.Handler {
	var out []slots.Handler
	for _, h := range e.cfg.Handlers {
		for _, req := range c.RequiredCapabilities {
			if hc := h.Capability(); hc.ID == req.ID && slots.VersionSatisfies(hc.Version, req.Version) {
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// rejudgeCapacity judges the offers refused for capacity or a budget
// limit again, in a stable order: a commitment that ended freed both.
func (e *engine) rejudgeCapacity() {
	var keys []itemKey
	for k, r := range e.refused {
		if r.Reason == protocol.RejectCapacity || r.Reason == protocol.RejectBudget {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b itemKey) int { return cmp.Or(strings.Compare(a.group, b.group), strings.Compare(a.id, b.id)) })
	for _, k := range keys {
		e.sync(k)
	}
}
