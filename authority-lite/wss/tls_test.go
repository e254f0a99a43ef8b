package wss

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

func TestLoadOrCreateCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	cert, fp, err := LoadOrCreateCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.Certificate[0])
	if fp != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("fingerprint %s", fp)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T", leaf.PublicKey)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("not valid for %s: %v", host, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind %v", entries)
	}

	// Restart: the same certificate, so pinned clients keep working.
	again, fp2, err := LoadOrCreateCert(dir)
	if err != nil || fp2 != fp || string(again.Certificate[0]) != string(cert.Certificate[0]) {
		t.Fatalf("reload: %s vs %s, %v", fp2, fp, err)
	}

	// A key alone (crash between the writes) is replaced by a new pair.
	if err := os.Remove(filepath.Join(dir, CertFile)); err != nil {
		t.Fatal(err)
	}
	_, fp3, err := LoadOrCreateCert(dir)
	if err != nil || fp3 == fp {
		t.Fatalf("key-only dir: %s, %v", fp3, err)
	}
	// A certificate alone is refused: clients may pin it.
	if err := os.Remove(filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateCert(dir); err == nil || !strings.Contains(err.Error(), "without") {
		t.Fatalf("cert-only dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateCert(dir); err == nil {
		t.Fatal("a corrupt key was accepted")
	}
}

func TestListenRefusesInsecureOffLoopback(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"127.0.0.2:0", true},
		{"localhost:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"[::]:0", false},
		{"192.0.2.1:0", false},
		{"example.com:0", false},
		{"127.0.0.1", false},
	}
	for _, tc := range cases {
		ln, err := Listen(ctx, tc.addr, ListenOptions{InsecureLoopback: true})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if ln != nil {
			_ = ln.Close()
		}
	}
	if _, err := Listen(ctx, "127.0.0.1:0", ListenOptions{}); err == nil {
		t.Error("a listener without a certificate and without insecure-loopback was opened")
	}
}

// TestServeWSS runs HELLO over TLS 1.3 with the certificate pinned, across
// a server restart that reuses the generated certificate.
func TestServeWSS(t *testing.T) {
	dir := t.TempDir()
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	var pinned string
	for i, nonce := range []string{"nonce-run1-0000000000", "nonce-run2-0000000000"} {
		cert, fp, err := LoadOrCreateCert(dir)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			pinned = fp
		} else if fp != pinned {
			t.Fatal("restart changed the certificate")
		}
		ctx, cancel := context.WithCancel(context.Background())
		ln, err := Listen(ctx, "127.0.0.1:0", ListenOptions{Certificate: &cert})
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(fb, Options{})
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		url := "wss://" + ln.Addr().String() + Path

		dialWith := func(cfg *tls.Config) (*websocket.Conn, *http.Response, error) {
			dctx, dcancel := context.WithTimeout(context.Background(), safety)
			defer dcancel()
			return websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}})
		}
		ws, resp, err := dialWith(ClientTLSConfig(pinned))
		if err != nil {
			t.Fatal(err)
		}
		if resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
			t.Fatalf("TLS state %+v", resp.TLS)
		}
		c := &client{t: t, ws: ws}
		c.hello(fb, key, nonce)
		_ = ws.Close(websocket.StatusNormalClosure, "")

		if _, _, err := dialWith(ClientTLSConfig("sha256:" + strings.Repeat("0", 64))); err == nil {
			t.Fatal("a wrong pin was accepted")
		}
		old := ClientTLSConfig(pinned)
		old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		if _, _, err := dialWith(old); err == nil {
			t.Fatal("TLS 1.2 was accepted")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
