package client

import (
	"net/url"

	"github.com/missionweave/mwp-worker/internal/tlstrust"
)

// Trust says how the worker authenticates the authority's TLS certificate
// (package tlstrust, shared with package remote).
type Trust = tlstrust.Trust

// ErrPinMismatch is returned by the handshake when a pinned server
// presents another certificate. It ends Run: retrying cannot change the
// certificate, and the operator must know (the error names both pins).
var ErrPinMismatch = tlstrust.ErrPinMismatch

func certPin(der []byte) string { return tlstrust.Pin(der) }

func checkURL(raw string, allowInsecure bool) (*url.URL, error) {
	return tlstrust.CheckURL(raw, allowInsecure)
}
