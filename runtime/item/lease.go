package item

import "time"

// MinRenewLead is the least time before expiry at which a renewal is sent:
// a lease about to run out is renewed at once, not at half its remainder.
const MinRenewLead = time.Second

// RenewAt is when a lease granted or last renewed at from and expiring at
// expires should be renewed: half-way through what remained, so one lost
// or slow renewal still leaves time for another before expiry.
func RenewAt(from, expires time.Time) time.Time {
	if !expires.After(from) {
		return from
	}
	at := from.Add(expires.Sub(from) / 2)
	if latest := expires.Add(-MinRenewLead); at.After(latest) {
		at = latest
	}
	if at.Before(from) {
		return from
	}
	return at
}
