package item

import (
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Offered is a standing offer to this worker that it keeps no record of:
// admission control judges it (spec 10.3) on what the engine gathered.
type Offered struct {
	Admission Admission
	// ContractRevision is the revision the acceptance names.
	ContractRevision uint64
	// Disclosure is the scheduler's, the item enqueued as if accepted;
	// zero when it was not (the worker is at capacity).
	Disclosure protocol.ScheduleDisclosure
	// Questions are what the handlers that would run the contract raised
	// about it (an essential ambiguity, spec 10.1); AskFailed: asking them
	// failed (the worker's log says why).
	Questions []string
	AskFailed bool
}

// Renewal is a substantially revised contract of an item this worker owns
// and has not started (spec 10.1), judged again: Viewed asked for it with
// RenewAcceptance.
type Renewal struct {
	Admission  Admission
	Revision   uint64
	OfferID    string // the offer this worker won
	Disclosure protocol.ScheduleDisclosure
	AgentID    string
}

func (Offered) input() {}
func (Renewal) input() {}

// Admission's effects.
type (
	// Admitted records admission's decision (Status): the offer's, or the
	// renewal's of Revision.
	Admitted struct {
		Decision AdmissionDecision
		OfferID  string
		Revision uint64 // a renewal's; 0 for an offer
	}
	// Ambiguous: the offer is not taken; the questions go to the Group
	// and only a corrected contract (a new offer or revision) is judged
	// again.
	Ambiguous struct{ Questions []string }
	// Declined records an offer (or, with Revision, a renewal) admission
	// refused: it is not judged again unless what refused it changes, and
	// the refusal is posted to the Group (spec 10.3).
	Declined struct {
		Rejection protocol.AdmissionRejection
		OfferID   string
		Revision  uint64
	}
	// Unschedule takes the item out of the scheduler.
	Unschedule struct{}
	// AcceptanceNoticed posts the acceptance's schedule disclosure to the
	// Group (the first publication, spec 11.2).
	AcceptanceNoticed struct{ Disclosure protocol.ScheduleDisclosure }
)

func (Admitted) effect()          {}
func (Ambiguous) effect()         {}
func (Declined) effect()          {}
func (Unschedule) effect()        {}
func (AcceptanceNoticed) effect() {}

// offeredTo judges a standing offer: an ambiguous contract is not taken,
// a refusal is recorded and posted, an acceptance creates the record,
// held in the scheduler until the ownership is granted, and sends
// work.accept_offer with the scheduler's disclosure.
func offeredTo(it Item, o Offered) (Item, []Effect) {
	if it.Phase != 0 {
		return it, nil // a record of the item is still here
	}
	if len(o.Questions) > 0 {
		return it, []Effect{Unschedule{}, Ambiguous{Questions: o.Questions}}
	}
	offer := o.Admission.OfferID
	if o.AskFailed {
		rej := protocol.AdmissionRejection{Reason: protocol.RejectCapability, Detail: "the handler could not be asked about the contract (the worker's log says why)"}
		return it, []Effect{Unschedule{}, Declined{Rejection: rej, OfferID: offer}}
	}
	d := o.Admission.Decide()
	out := []Effect{Admitted{Decision: d, OfferID: offer}}
	if !d.Accepted() {
		return it, append(out, Unschedule{}, Declined{Rejection: *d.Rejection, OfferID: offer})
	}
	it = Item{ID: it.ID, Phase: Accepting, OfferID: offer, Hold: true, Cost: UsageOf(d.Basis.ExpectedCost)}
	return it, append(out, Created{}, Enqueue{}, AcceptanceNoticed{Disclosure: o.Disclosure},
		Send{Type: protocol.CmdWorkAcceptOffer, Payload: &protocol.AcceptOfferPayload{WorkItemID: it.ID, OfferID: offer,
			ContractRevision: o.ContractRevision, ScheduleDisclosure: o.Disclosure}})
}

// renewal judges a revised contract again. Accepted, work.accept_offer
// goes out again for the offer the worker won, naming the new revision,
// and the item waits, held, until the authority records it. Refused, the
// item is released with work.fail naming the refusal (by ownership epoch:
// a queued item has no lease) and the refusal is posted like an offer's.
func renewal(it Item, r Renewal, now time.Time) (Item, []Effect) {
	if it.Phase != Queued {
		return it, nil
	}
	a := r.Admission
	a.Renewal = true
	d := a.Decide()
	it.ForceRenew = false
	out := []Effect{Admitted{Decision: d, OfferID: r.OfferID, Revision: r.Revision}}
	if d.Accepted() {
		it.Hold, it.Reaccepting, it.Cost = true, r.Revision, UsageOf(d.Basis.ExpectedCost)
		return it, append(out, Enqueue{}, AcceptanceNoticed{Disclosure: r.Disclosure},
			Send{Type: protocol.CmdWorkAcceptOffer, Payload: &protocol.AcceptOfferPayload{WorkItemID: it.ID, OfferID: r.OfferID,
				ContractRevision: r.Revision, ScheduleDisclosure: r.Disclosure}})
	}
	rej := *d.Rejection
	it.Phase = Finishing
	return it, append(out, Declined{Rejection: rej, OfferID: r.OfferID, Revision: r.Revision}, Unschedule{},
		Send{Type: protocol.CmdWorkFail, Payload: &protocol.FailWorkPayload{WorkItemID: it.ID,
			Reason:   fmt.Sprintf("renewed admission of contract revision %d refused (%s): %s", r.Revision, rej.Reason, rej.Detail),
			Evidence: FailureEvidence(it.ID, r.AgentID, now), OwnershipEpoch: protocol.Uint64(it.Epoch)}})
}

// Refusal is what the engine remembers of an offer it did not take: the
// offer, admission's reason, the count of commitments ended when it was
// refused (Capacity), the contract revision of a refused renewal or of an
// ambiguous contract.
type Refusal struct {
	OfferID   string
	Reason    protocol.AdmissionReason
	Capacity  uint64
	Revision  uint64
	Ambiguous bool
}

// Stands reports whether the refusal still decides the offer standing now
// (offerID at revision; freed commitments have ended so far), so it is
// not judged again (Viewed.Judged). A capacity refusal is judged again
// once a commitment has ended since; a dependency or budget refusal
// whenever the item's view changed (this is asked on a view); an
// ambiguity on a new offer or revision only; capability, authorization and
// deadline refusals stand for that offer.
func (r Refusal) Stands(offerID string, revision, freed uint64) bool {
	switch {
	case r.OfferID != offerID:
		return false
	case r.Ambiguous:
		return r.Revision == revision
	case r.Reason == protocol.RejectCapacity:
		return r.Capacity == freed
	case r.Reason == protocol.RejectDependency || r.Reason == protocol.RejectBudget:
		return false
	}
	return true
}
