package embed

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"strings"
	"testing"
)

// The embedded authority serves wss on loopback with the certificate its
// Endpoint pins, and hands out what a worker needs in process.
func TestStartServesPinnedWSS(t *testing.T) {
	dir := t.TempDir()
	a, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	url, pin := a.Endpoint()
	if !strings.HasPrefix(url, "wss://127.0.0.1:") || !strings.HasSuffix(url, "/mwp") {
		t.Fatalf("URL %q", url)
	}
	conn, err := tls.Dial("tcp", a.Addr.String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
	conn.Close()
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != pin {
		t.Fatalf("served certificate %s, Endpoint pins %s", got, pin)
	}
	pub := a.Service.PublicKey()
	if k, ok := a.Keys().PublicKey(pub.KeyID); !ok || !bytes.Equal(k, pub.Key) {
		t.Fatal("Keys does not resolve the authority's event key")
	}
	uri, publish, err := a.Artifacts([]byte("hello"))
	if err != nil || !publish || !strings.HasPrefix(uri, "mwp-artifact:sha256:") {
		t.Fatalf("Artifacts: %q %v %v", uri, publish, err)
	}
	if data, err := a.Service.Artifact(strings.TrimPrefix(uri, "mwp-artifact:")); err != nil || string(data) != "hello" {
		t.Fatalf("stored artifact %q %v", data, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The certificate is kept in Dir: a restart keeps the pin.
	b, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, pin2 := b.Endpoint(); pin2 != pin {
		t.Fatalf("pin changed across a restart: %s then %s", pin, pin2)
	}
}
