package runtime

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/offline"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// A lease is over at its expiry instant, not only after it (spec 11.3:
// a lease valid until T authorizes nothing at T), and only while online:
// offline and reconciling, the grace of spec 11.5 decides instead.
func TestLeaseOverAtItsExpiry(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	exp := t0.Add(time.Minute)
	e := &engine{mon: offline.NewMonitor(offline.Config{}, t0)}
	it := &item{Item: lc.Item{Expires: exp}}
	if e.leaseOver(it, exp.Add(time.Hour)) {
		t.Fatal("offline: the lease's end is the grace's to decide")
	}
	e.mon.Connected(t0)
	if e.leaseOver(it, exp.Add(time.Hour)) {
		t.Fatal("reconciling: the lease's end is the grace's to decide")
	}
	e.mon.Reconciled(t0)
	for _, tc := range []struct {
		at   time.Time
		over bool
	}{
		{exp.Add(-time.Nanosecond), false},
		{exp, true},
		{exp.Add(time.Nanosecond), true},
	} {
		if got := e.leaseOver(it, tc.at); got != tc.over {
			t.Fatalf("online at expiry%+v: over %v, want %v", tc.at.Sub(exp), got, tc.over)
		}
	}
	if e.leaseOver(&item{}, exp) {
		t.Fatal("an item without a lease has no lease to be over")
	}
}
