package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/urfave/cli/v3"
)

// The connection flags of `authority serve` reach the server: with
// --max-conns 1 a second connection is answered 503 with Retry-After (the
// --handshake-timeout in seconds) and a BACKPRESSURE body, and a silent
// connection is closed after the handshake timeout.
func TestAuthorityServeConnectionLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mwp-worker", "authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback",
			"--max-conns", "1", "--max-conns-per-ip", "5", "--handshake-timeout", "2s"}, &out, &errOut)
	}()
	urlRe := regexp.MustCompile(`listening on ws://(127\.0\.0\.1:\d+)/mwp`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no URL printed: %q %q", out.String(), errOut.String())
	}
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var resp *http.Response
	// The held connection is counted once the server has accepted it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = hc.Get("http://" + addr + "/mwp"); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		resp.Body.Close()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e protocol.Error
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || json.Unmarshal(body, &e) != nil || e.Code != protocol.CodeBackpressure {
		t.Fatalf("second connection: %d Retry-After %q body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	_ = held.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("silent connection not closed by the handshake timeout: %v", err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

func TestAuthorityServeRefusesBadLimits(t *testing.T) {
	for _, flag := range []string{"--max-conns=0", "--max-conns-per-ip=-1", "--handshake-timeout=0s"} {
		code, _, stderr := runCLI(t, "authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback", flag)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "must be positive") {
			t.Fatalf("%s: exit %d, stderr %q", flag, code, stderr)
		}
	}
}

// The retention flags: none negative, and a purge needs archiving; each
// refusal is one line and exit 1, before anything opens.
func TestAuthorityServeRefusesBadRetention(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--retain-events=-1"}, "must not be negative"},
		{[]string{"--purge-after=-1s"}, "must not be negative"},
		{[]string{"--archive-after=0s", "--purge-after=1h"}, "--purge-after deletes archived Groups: it needs --archive-after"},
	} {
		args := append([]string{"authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback"}, tc.flags...)
		code, _, stderr := runCLI(t, args...)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, tc.want) {
			t.Fatalf("%v: exit %d, stderr %q", tc.flags, code, stderr)
		}
	}
}

// --route-rate and --hello-rate are token buckets, BURST/EVERY; a bad one
// is one line and exit 1, before anything listens.
func TestAuthorityServeRates(t *testing.T) {
	for _, tc := range []struct {
		in    string
		burst int
		every time.Duration
	}{
		{"60/1s", 60, time.Second},
		{"1/100ms", 1, 100 * time.Millisecond},
		{"1000000/1ms", 1000000, time.Millisecond},
		{"0/1s", 0, 0}, {"-1/1s", 0, 0}, {"60", 0, 0}, {"60/", 0, 0}, {"/1s", 0, 0},
		{"60/0s", 0, 0}, {"60/-1s", 0, 0}, {"60/1", 0, 0}, {"x/1s", 0, 0}, {"60/1s/2", 0, 0},
	} {
		burst, every, err := parseRate(tc.in)
		if (err == nil) != (tc.burst > 0) || burst != tc.burst || every != tc.every {
			t.Errorf("parseRate(%q) = %d, %v, %v", tc.in, burst, every, err)
		}
	}
	for _, flag := range []string{"--route-rate=0/1s", "--route-rate=10", "--hello-rate=0/1s", "--hello-rate=10/x"} {
		code, out, stderr := runCLI(t, "authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback", flag)
		name, _, _ := strings.Cut(flag, "=")
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, name+": ") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", flag, code, out, stderr)
		}
	}
}

// FuzzParseRate: any --route-rate text is refused or read as a bucket of
// at least one request refilled after a positive time, which reads back
// the same when written out again.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"60/100ms", "1/1s", "0/1s", "60/", "/", "9999999999999999999/1h", "1/1.5s", "+3/2m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		burst, every, err := parseRate(s)
		if err != nil {
			if burst != 0 || every != 0 {
				t.Fatalf("%q refused with %d, %v", s, burst, every)
			}
			return
		}
		if burst < 1 || every <= 0 {
			t.Fatalf("%q read as %d/%v", s, burst, every)
		}
		b2, e2, err := parseRate(strconv.Itoa(burst) + "/" + every.String())
		if err != nil || b2 != burst || e2 != every {
			t.Fatalf("%q: %d/%v reads back as %d/%v, %v", s, burst, every, b2, e2, err)
		}
	})
}

// --policy-limit and --policy-soft-limit set the spec 20 policy; bad
// values are one line and exit 1.
func TestAuthorityServePolicyFlags(t *testing.T) {
	parse := func(args ...string) (authoritylite.Policy, error) {
		var got authoritylite.Policy
		var perr error
		var serve *cli.Command
		for _, c := range authorityCommand().Commands {
			if c.Name == "serve" {
				serve = c
			}
		}
		serve.Action = func(_ context.Context, cmd *cli.Command) error {
			got, perr = policyFrom(cmd)
			return nil
		}
		if err := serve.Run(context.Background(), append([]string{"serve", "--data", "x"}, args...)); err != nil {
			t.Fatal(err)
		}
		return got, perr
	}
	p, err := parse("--policy-limit", "maxQueuedWorkItems=3,maxOpenClarifications=2", "--policy-limit", "maxDelegationDepth=5", "--policy-soft-limit", "0.5")
	if err != nil || p.MaxQueuedWorkItems != 3 || p.MaxOpenClarifications != 2 || p.MaxDelegationDepth != 5 || p.SoftLimit != 0.5 {
		t.Fatalf("set: %+v %v", p, err)
	}
	if p, err := parse("--policy-soft-limit", "0"); err != nil || p.SoftLimit >= 0 {
		t.Fatalf("soft limit 0: %+v %v, want none posted", p, err)
	}
	for _, flag := range []string{"--policy-limit=bogus=1", "--policy-limit=maxOpenWorkItems=0", "--policy-limit=maxOpenWorkItems", "--policy-soft-limit=1.5"} {
		code, _, stderr := runCLI(t, "authority", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-loopback", flag)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "policy") {
			t.Fatalf("%s: exit %d, stderr %q", flag, code, stderr)
		}
	}
}

// `authority serve` on a data directory another authority holds names the
// holding process in its one line, as the worker does for its store.
func TestAuthorityServeNamesTheHolder(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks here: the holder cannot be named")
	}
	data := t.TempDir()
	held := startAuthority(t, []string{"mwp-worker", "authority", "serve", "--data", data, "--listen", "127.0.0.1:0", "--insecure-loopback"})
	defer held.stop(t)
	code, out, stderr := runCLI(t, "authority", "serve", "--data", data, "--listen", "127.0.0.1:0", "--insecure-loopback")
	want := fmt.Sprintf("authority.db is locked by process %d (", os.Getpid())
	if code != 1 || out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, want) {
		t.Fatalf("serve on a held directory: exit %d, stdout %q, stderr %q; want one line with %q", code, out, stderr, want)
	}
}
