package item

import (
	"testing"
	"time"
)

// A lease is over at its expiry instant, not only after it (spec 11.3:
// a lease valid until T authorizes nothing at T), and only while online:
// offline and reconciling, the grace of spec 11.5 decides instead.
func TestLeaseOverAtItsExpiry(t *testing.T) {
	exp := t0.Add(time.Minute)
	it := Item{Expires: exp}
	if it.LeaseOver(false, exp.Add(time.Hour)) {
		t.Fatal("offline or reconciling: the lease's end is the grace's to decide")
	}
	for _, tc := range []struct {
		at   time.Time
		over bool
	}{
		{exp.Add(-time.Nanosecond), false},
		{exp, true},
		{exp.Add(time.Nanosecond), true},
	} {
		if got := it.LeaseOver(true, tc.at); got != tc.over {
			t.Fatalf("online at expiry%+v: over %v, want %v", tc.at.Sub(exp), got, tc.over)
		}
	}
	if (Item{}).LeaseOver(true, exp) {
		t.Fatal("an item without a lease has no lease to be over")
	}
}
