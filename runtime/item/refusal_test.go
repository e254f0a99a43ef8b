package item

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// A refused offer is judged again when what refused it may have changed
// (Refusal.Stands, read on every view of the item): a capacity refusal
// once a commitment has ended since, a dependency or budget refusal on any
// view, an ambiguous contract on a new revision or offer; the others stand
// for that offer.
func TestRefusalStands(t *testing.T) {
	capacity := Refusal{OfferID: "of-1", Reason: protocol.RejectCapacity, Capacity: 3}
	for _, tc := range []struct {
		name     string
		r        Refusal
		offer    string
		rev, fre uint64
		stands   bool
	}{
		{"capacity, nothing freed since", capacity, "of-1", 1, 3, true},
		{"capacity, a commitment ended since", capacity, "of-1", 1, 4, false},
		{"budget, on a view", Refusal{OfferID: "of-1", Reason: protocol.RejectBudget}, "of-1", 1, 0, false},
		{"dependency, on a view", Refusal{OfferID: "of-1", Reason: protocol.RejectDependency}, "of-1", 1, 0, false},
		{"capability stands", Refusal{OfferID: "of-1", Reason: protocol.RejectCapability}, "of-1", 1, 9, true},
		{"deadline stands", Refusal{OfferID: "of-1", Reason: protocol.RejectDeadline}, "of-1", 2, 9, true},
		{"authorization stands", Refusal{OfferID: "of-1", Reason: protocol.RejectAuthorization}, "of-1", 1, 9, true},
		{"another offer is judged", Refusal{OfferID: "of-1", Reason: protocol.RejectCapability}, "of-2", 1, 0, false},
		{"ambiguous, same revision", Refusal{OfferID: "of-1", Ambiguous: true, Revision: 1}, "of-1", 1, 5, true},
		{"ambiguous, corrected contract", Refusal{OfferID: "of-1", Ambiguous: true, Revision: 1}, "of-1", 2, 0, false},
		{"ambiguous, new offer", Refusal{OfferID: "of-1", Ambiguous: true, Revision: 1}, "of-2", 1, 0, false},
	} {
		if got := tc.r.Stands(tc.offer, tc.rev, tc.fre); got != tc.stands {
			t.Errorf("%s: stands %v, want %v", tc.name, got, tc.stands)
		}
	}
}
