package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAuthorityServeTLS(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mwp-worker", "authority", "serve", "--data", dir, "--listen", "127.0.0.1:0"}, &out, &errOut)
	}()
	urlRe := regexp.MustCompile(`listening on wss://(127\.0\.0\.1:\d+)/mwp`)
	fpRe := regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`)
	deadline := time.Now().Add(10 * time.Second)
	var addr, fp string
	for time.Now().Before(deadline) {
		if m := urlRe.FindStringSubmatch(out.String()); m != nil {
			if f := fpRe.FindStringSubmatch(out.String()); f != nil {
				addr, fp = m[1], f[1]
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		cancel()
		t.Fatalf("no URL and fingerprint printed: %q %q", out.String(), errOut.String())
	}
	// TLS 1.3 with the pinned certificate succeeds.
	conn, err := tls.Dial("tcp", addr, wss.ClientTLSConfig(fp))
	if err != nil {
		t.Fatalf("pinned TLS dial: %v", err)
	}
	if v := conn.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("TLS version %x, want 1.3", v)
	}
	conn.Close()
	// TLS 1.2 is refused.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c12 := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
	if err := c12.Handshake(); err == nil {
		t.Fatal("TLS 1.2 handshake accepted")
	}
	c12.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
	// The certificate is reused on the next start.
	code, out2, _ := runCLIWithTimeout(t, 300*time.Millisecond, "authority", "serve", "--data", dir, "--listen", "127.0.0.1:0")
	if code != 0 || !strings.Contains(out2, fp) {
		t.Fatalf("restart: exit %d, fingerprint changed: %q", code, out2)
	}
}

func TestAuthorityServeRefusesInsecureNonLoopback(t *testing.T) {
	code, _, stderr := runCLI(t, "authority", "serve", "--data", t.TempDir(), "--listen", "0.0.0.0:0", "--insecure-loopback")
	if code != 1 || !strings.Contains(stderr, "loopback") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func runCLIWithTimeout(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errOut lockedBuffer
	code := run(ctx, append([]string{"mwp-worker"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}
