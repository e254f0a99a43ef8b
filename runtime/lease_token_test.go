package runtime

import (
	"testing"
	"time"
)

func TestLeaseTokenBoundToLease(t *testing.T) {
	s := []byte("secret")
	a := leaseToken(s, "lease-1", t0)
	if a != leaseToken(s, "lease-1", t0) {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{leaseToken(s, "lease-2", t0), leaseToken(s, "lease-1", t0.Add(time.Second)), leaseToken([]byte("x"), "lease-1", t0)} {
		if other == a {
			t.Fatal("token does not depend on lease, expiry and secret")
		}
	}
}
