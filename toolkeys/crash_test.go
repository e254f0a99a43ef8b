package toolkeys

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const crashEnv = "MWP_TOOLKEYS_CRASH" // "mode|db path|service url"

var crashOp = Op{"mis-crash", "wi-1", 2, "deploy.prod"}

// killSelf is what a power cut or OOM kill does to a worker: no deferred
// function, no further write.
func killSelf() {
	p, _ := os.FindProcess(os.Getpid())
	p.Kill()
	time.Sleep(time.Minute) // never reached: the kill is immediate
	os.Exit(3)
}

// crashChild runs crashOp against the service and dies at mode's point.
func crashChild(mode, path, url string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err == nil {
		var l *Ledger
		if l, err = OpenLedger(db); err == nil {
			_, err = l.Do(context.Background(), crashOp, func(ctx context.Context, key string, _ uint64) ([]byte, error) {
				if mode == "before-effect" {
					killSelf()
				}
				b, err := postEffect(ctx, url, key, crashOp)
				if mode == "after-effect" {
					killSelf()
				}
				return b, err
			})
		}
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	killSelf() // "after-complete": completion is durable, the process dies anyway
}

// A worker killed at any point of Do (after the start record but before
// the effect, after the effect but before its completion record, after
// completion), once or repeatedly, leaves a ledger that, reopened, makes
// the operation's effect happen exactly once and ends up holding the
// service's first response.
func TestCrashKillDuringDo(t *testing.T) {
	if v := os.Getenv(crashEnv); v != "" {
		mode, rest, _ := strings.Cut(v, "|")
		path, url, _ := strings.Cut(rest, "|")
		crashChild(mode, path, url)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cases := []struct {
		modes        []string
		wantState    State  // of the record after the crashes
		wantAttempts uint64 // after the parent's Do
		wantRequests int    // the service saw, in all
	}{
		{[]string{"before-effect"}, StateStarted, 2, 1},
		{[]string{"after-effect"}, StateStarted, 2, 2},
		{[]string{"after-complete"}, StateCompleted, 1, 1},
		{[]string{"after-effect", "before-effect", "after-effect"}, StateStarted, 4, 3},
	}
	key, _ := Key(crashOp)
	for _, c := range cases {
		t.Run(strings.Join(c.modes, ","), func(t *testing.T) {
			svc := newService()
			url := serveHTTP(t, svc)
			path := tempDBPath(t)
			for _, mode := range c.modes {
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillDuringDo$")
				cmd.Env = append(os.Environ(), crashEnv+"="+mode+"|"+path+"|"+url)
				out, err := cmd.CombinedOutput()
				if err == nil || cmd.ProcessState.ExitCode() != -1 {
					t.Fatalf("child %s was not killed: %v\n%s", mode, err, out)
				}
			}
			db := openDB(t, path)
			l := openLedger(t, db, Options{})
			rec, ok, err := l.Lookup(key)
			if err != nil || !ok || rec.State != c.wantState || rec.Attempts != uint64(len(c.modes)) {
				t.Fatalf("after the crashes: %+v %v %v", rec, ok, err)
			}
			parentCalled := false
			res, err := l.Do(context.Background(), crashOp, func(ctx context.Context, k string, _ uint64) ([]byte, error) {
				parentCalled = true
				return postEffect(ctx, url, k, crashOp)
			})
			if err != nil || res.Attempt != c.wantAttempts || res.Replayed != (c.wantState == StateCompleted) || res.Replayed == parentCalled {
				t.Fatalf("Do after reopen: %+v %v (called %v)", res, err, parentCalled)
			}
			if n := svc.effectsOf(opBody(crashOp)); n != 1 {
				t.Fatalf("%d effects, want exactly 1", n)
			}
			if n := svc.requestsOf(key); n != c.wantRequests {
				t.Fatalf("%d requests, want %d", n, c.wantRequests)
			}
			first := svc.firstResponse(key)
			if !bytes.Equal(res.Value, first) {
				t.Fatalf("Do returned %q, the service's response was %q", res.Value, first)
			}
			if rec, _, _ := l.Lookup(key); rec.State != StateCompleted || !bytes.Equal(rec.Result, first) {
				t.Fatalf("ledger after Do: %+v", rec)
			}
			if res, err := l.Do(context.Background(), crashOp, mustNotCall(t)); err != nil || !res.Replayed || !bytes.Equal(res.Value, first) {
				t.Fatalf("replay: %+v %v", res, err)
			}
		})
	}
}
