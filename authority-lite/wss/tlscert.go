package wss

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Certificate files written by LoadOrCreateCert.
const (
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// certLifetime is long because the certificate is trusted by pinning its
// fingerprint, not by a chain or a date.
const certLifetime = 10 * 365 * 24 * time.Hour

// LoadOrCreateCert returns the server certificate kept in dir, creating a
// self-signed ECDSA P-256 one for 127.0.0.1, ::1 and localhost on first use
// (dir/cert.pem, dir/key.pem with mode 0600, each written atomically). The
// same certificate, and so the same fingerprint, is returned on every later
// start. fingerprint is "sha256:" + hex of the certificate's DER, what
// clients pin (ClientTLSConfig).
//
// A key without a certificate is what a crash between the two writes
// leaves: no fingerprint was ever published, so a new pair is made. A
// certificate without its key is refused rather than silently replaced,
// since clients may have pinned it.
func LoadOrCreateCert(dir string) (cert tls.Certificate, fingerprint string, err error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		cert, err = tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("wss: load certificate from %s: %w", dir, err)
		}
		return cert, Fingerprint(cert), nil
	case certErr == nil && errors.Is(keyErr, fs.ErrNotExist):
		return tls.Certificate{}, "", fmt.Errorf("wss: %s exists without %s; remove it to make a new certificate (clients pinning the old one must be updated)", certPath, keyPath)
	case certErr != nil && !errors.Is(certErr, fs.ErrNotExist):
		return tls.Certificate{}, "", fmt.Errorf("wss: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return tls.Certificate{}, "", fmt.Errorf("wss: %w", keyErr)
	}
	certPEM, keyPEM, err := newSelfSigned(time.Now())
	if err != nil {
		return tls.Certificate{}, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("wss: %w", err)
	}
	// Key first: a crash in between leaves a key alone, which is retried.
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, "", err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, "", err
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("wss: %w", err)
	}
	return cert, Fingerprint(cert), nil
}

// Fingerprint returns "sha256:" + hex of the leaf certificate's DER.
func Fingerprint(cert tls.Certificate) string {
	if len(cert.Certificate) == 0 {
		return ""
	}
	return fingerprintDER(cert.Certificate[0])
}

func fingerprintDER(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func newSelfSigned(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("wss: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("wss: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "mwp authority-lite (local)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("wss: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("wss: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// TLSConfig is the server side: the certificate, TLS 1.3 only, HTTP/1.1
// (the WebSocket upgrade) over ALPN.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"http/1.1"},
	}
}

// ClientTLSConfig is a client configuration that trusts exactly the
// certificate with the given fingerprint (as LoadOrCreateCert returns it),
// whatever its names or dates, over TLS 1.3.
func ClientTLSConfig(fingerprint string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		// The chain and host checks are replaced by the pin below.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("wss: server sent no certificate")
			}
			if got := fingerprintDER(cs.PeerCertificates[0].Raw); got != fingerprint {
				return fmt.Errorf("wss: server certificate %s does not match the pinned %s", got, fingerprint)
			}
			return nil
		},
	}
}

// writeFileAtomic makes path appear complete or not at all.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("wss: write %s: %w", path, err)
	}
	return nil
}
