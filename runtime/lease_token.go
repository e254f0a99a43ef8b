package runtime

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

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
