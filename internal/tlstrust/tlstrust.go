// Package tlstrust is how a client authenticates the authority's TLS
// certificate (docs/wire.md "Connection"): TLS 1.3 only, by system roots,
// a CA file, or a pin of the exact certificate; and which authority URLs
// are acceptable. The worker's wss client and package remote share it.
package tlstrust

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// Trust says how a client authenticates the authority's TLS certificate.
// At most one of the three modes may be set; none means the system roots.
type Trust struct {
	// CAFile is a PEM file of certificates to trust instead of the system
	// roots: a private CA, or the authority's self-signed certificate.
	CAFile string
	// CAPEM is CAFile's content given directly.
	CAPEM []byte
	// Pin is "sha256:" and the 64 lowercase hex digits of the SHA-256 of the
	// server's leaf certificate (DER). Only that exact certificate is
	// accepted; chains, names and expiry are not consulted, so the pin is
	// the whole trust decision.
	Pin string
}

// Pin returns the pin of a DER certificate in Trust.Pin's form.
func Pin(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parsePin checks a pin's form strictly and returns its digest.
func parsePin(pin string) ([sha256.Size]byte, error) {
	var out [sha256.Size]byte
	h, ok := strings.CutPrefix(pin, "sha256:")
	if !ok || len(h) != 2*sha256.Size {
		return out, fmt.Errorf("tls trust: pin %q is not sha256:<64 lowercase hex digits>", pin)
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return out, fmt.Errorf("tls trust: pin %q is not sha256:<64 lowercase hex digits>", pin)
		}
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, fmt.Errorf("tls trust: pin %q: %w", pin, err)
	}
	return out, nil
}

// ErrPinMismatch is returned by the handshake when a pinned server
// presents another certificate. It ends Run: retrying cannot change the
// certificate, and the operator must know (the error names both pins).
var ErrPinMismatch = errors.New("tls trust: the authority's certificate does not match the pinned fingerprint")

// Config returns the client TLS configuration for t: TLS 1.3 only (spec
// 17.1), and certificate checks by system roots, by the given PEM
// certificates, or by the pin.
func (t Trust) Config() (*tls.Config, error) {
	modes := 0
	for _, set := range []bool{t.CAFile != "", len(t.CAPEM) > 0, t.Pin != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return nil, errors.New("tls trust: set only one of Trust.CAFile, Trust.CAPEM and Trust.Pin")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	switch {
	case t.Pin != "":
		want, err := parsePin(t.Pin)
		if err != nil {
			return nil, err
		}
		// Normal verification would reject a self-signed certificate; the
		// pin replaces it entirely. VerifyConnection rather than
		// VerifyPeerCertificate, because only the former also runs on
		// resumed sessions. The handshake still proves the server holds
		// the pinned certificate's key.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrPinMismatch
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				return fmt.Errorf("%w: it presents %s, the pin is %s", ErrPinMismatch, Pin(cs.PeerCertificates[0].Raw), t.Pin)
			}
			return nil
		}
	case t.CAFile != "" || len(t.CAPEM) > 0:
		data := t.CAPEM
		if t.CAFile != "" {
			var err error
			if data, err = os.ReadFile(t.CAFile); err != nil {
				return nil, fmt.Errorf("tls trust: read CA file: %w", err)
			}
		}
		pool, err := certPool(data)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// certPool parses every CERTIFICATE block of a PEM file; anything else in
// the file, or no certificate at all, is an error rather than silently
// trusting less than the operator meant.
func certPool(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("tls trust: CA PEM holds a %q block, want only CERTIFICATE", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls trust: CA PEM certificate %d: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("tls trust: CA PEM holds no certificate")
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		return nil, errors.New("tls trust: CA PEM has trailing data that is not a PEM block")
	}
	return pool, nil
}

// CheckURL accepts wss:// URLs, and ws:// only to a loopback address when
// allowInsecure is set (tests and --insecure-loopback). An empty path
// becomes /mwp.
func CheckURL(raw string, allowInsecure bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("tls trust: authority URL: %w", err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("tls trust: authority URL %q must be wss://host:port/path", raw)
	}
	switch u.Scheme {
	case "wss":
	case "ws":
		if !allowInsecure {
			return nil, fmt.Errorf("tls trust: authority URL %q is not TLS (wss); plain ws needs the insecure-loopback option", raw)
		}
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("tls trust: plain ws is allowed only to a loopback address, not %q", u.Hostname())
		}
	default:
		return nil, fmt.Errorf("tls trust: authority URL scheme %q is not wss", u.Scheme)
	}
	if u.Path == "" {
		u.Path = "/mwp"
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
