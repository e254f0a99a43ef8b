package runtime

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

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

// leaseToken is the credential a handler gets for one execution lease: a
// MAC of the lease id and its expiry under the worker's secret, so it names
// the lease it was issued under and changes with each renewal (spec 11.3:
// tokens are bound to the lease, never the other way round).
func leaseToken(secret []byte, leaseID string, expires time.Time) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(leaseID))
	m.Write([]byte{0})
	m.Write([]byte(expires.UTC().Format(time.RFC3339Nano)))
	return "mwpl1." + leaseID + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
