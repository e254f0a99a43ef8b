package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned makes a certificate for 127.0.0.1 like the authority's
// generated local one.
func selfSigned(t *testing.T, name string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func tlsServer(t *testing.T, cert tls.Certificate, maxVersion uint16) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: maxVersion}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func handshake(addr string, tr Trust) error {
	cfg, err := tr.Config()
	if err != nil {
		return err
	}
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	return c.Close()
}

func TestTrustModes(t *testing.T) {
	certA, pemA := selfSigned(t, "authority-a")
	certB, pemB := selfSigned(t, "authority-b")
	addr := tlsServer(t, certA, 0)
	addr12 := tlsServer(t, certA, tls.VersionTLS12)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pemA, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		addr    string
		trust   Trust
		wantErr string // substring; "" = handshake succeeds
	}{
		{"pin of the server's certificate", addr, Trust{Pin: certPin(certA.Leaf.Raw)}, ""},
		{"pin of another certificate", addr, Trust{Pin: certPin(certB.Leaf.Raw)}, "pinned fingerprint"},
		{"CA PEM of the server's certificate", addr, Trust{CAPEM: pemA}, ""},
		{"CA file of the server's certificate", addr, Trust{CAFile: caFile}, ""},
		{"CA PEM of another certificate", addr, Trust{CAPEM: pemB}, "certificate"},
		{"system roots refuse a self-signed certificate", addr, Trust{}, "certificate"},
		{"TLS 1.2 server refused even with the right pin", addr12, Trust{Pin: certPin(certA.Leaf.Raw)}, "version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := handshake(tt.addr, tt.trust)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("handshake: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("handshake = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

func TestTrustConfigErrors(t *testing.T) {
	_, pemA := selfSigned(t, "a")
	pin := certPin([]byte("x"))
	tests := []struct {
		name  string
		trust Trust
	}{
		{"two modes", Trust{Pin: pin, CAPEM: pemA}},
		{"pin uppercase hex", Trust{Pin: strings.ToUpper(pin[:7]) + strings.ToUpper(pin[7:])}},
		{"pin upper digits only", Trust{Pin: "sha256:" + strings.ToUpper(pin[7:])}},
		{"pin wrong algorithm", Trust{Pin: "sha1:" + pin[7:]}},
		{"pin short", Trust{Pin: pin[:len(pin)-2]}},
		{"pin long", Trust{Pin: pin + "00"}},
		{"pin not hex", Trust{Pin: "sha256:" + strings.Repeat("zz", 32)}},
		{"CA PEM empty", Trust{CAPEM: []byte("not pem")}},
		{"CA PEM with a key block", Trust{CAPEM: append(pemA, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")...)}},
		{"CA PEM with trailing junk", Trust{CAPEM: append(pemA, []byte("junk")...)}},
		{"CA file missing", Trust{CAFile: filepath.Join(t.TempDir(), "nope.pem")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.trust.Config(); err == nil {
				t.Fatal("Config accepted it")
			}
		})
	}
	cfg, err := Trust{}.Config()
	if err != nil || cfg.MinVersion != tls.VersionTLS13 || cfg.InsecureSkipVerify || cfg.RootCAs != nil {
		t.Fatalf("system-roots config = %+v, %v", cfg, err)
	}
}

// TestClientOverWSSWithPin runs the whole client over TLS: the right pin
// connects; a wrong one never gets past the handshake.
func TestClientOverWSSWithPin(t *testing.T) {
	noLeaks(t)
	certA, _ := selfSigned(t, "authority-a")
	certB, _ := selfSigned(t, "authority-b")
	fs := newFakeServer(t, &certA)
	fs.setLog("grp-a", groupLog(t, "grp-a", 3))
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}, Trust: Trust{Pin: certPin(certA.Leaf.Raw)}})
	waitFor(t, r.sig, "events over wss", func() bool { return store.Cursor("grp-a") == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// A wrong pin ends Run at once, naming both fingerprints: retrying
	// cannot change the certificate.
	wrong := certPin(certB.Leaf.Raw)
	r2 := startClient(t, fs, Config{Store: store, Trust: Trust{Pin: wrong}})
	waitFor(t, r2.sig, "stopped", func() bool { return r2.st.count(StateStopped) == 1 })
	ch, _ := r2.st.last(StateStopped)
	if !errors.Is(ch.Err, ErrPinMismatch) || !strings.Contains(ch.Err.Error(), wrong) || !strings.Contains(ch.Err.Error(), certPin(certA.Leaf.Raw)) {
		t.Fatalf("stop error %v, want the pin mismatch naming both pins", ch.Err)
	}
	if r2.st.count(StateConnected) != 0 {
		t.Fatal("connected to a server whose certificate does not match the pin")
	}
	if err := r2.stop(t); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("Run returned %v, want the pin mismatch", err)
	}
}
