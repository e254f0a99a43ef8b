package runtime

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
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
