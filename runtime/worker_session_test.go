package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// A second process of the same agent opens a newer session: the first one's
// lease is revoked, its slot stops at a safe point and its Run returns
// client.ErrSessionReplaced once the authority ends its stale session.
func TestWorkerSessionReplaced(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)

	cfg2 := k.workerConfig("w1", t.TempDir(), newStepHandler(2), 1)
	cfg2.Key = cfg.Key
	// The new process knows nothing: the authority's answer corrects its
	// session epoch (0 → 1), and it opens session 2.
	tw2 := k.start(cfg2)
	if st := tw2.w.Status(); st.SessionEpoch != 2 {
		t.Fatalf("second process session %d, want 2", st.SessionEpoch)
	}
	// Session 1's lease is revoked; the new process, the same agent and
	// owner, may already have started the item again under session 2.
	if w := k.item("wi-1"); w.Lease != nil && w.Lease.SessionEpoch != 2 || w.Lease == nil && w.State != protocol.WorkQueued {
		t.Fatalf("replacement did not revoke the lease: %s %v", w.State, w.Lease)
	}
	// The old process learns it on its open connection: the authority ends
	// it with AUTH_STALE_SESSION, no reconnect needed.
	var err error
	k.until("old process stopped", func() bool {
		select {
		case err = <-tw.done:
			tw.done <- err
			return true
		default:
			k.fc.Advance(50 * time.Millisecond)
			return false
		}
	}, nil)
	if !errors.Is(err, client.ErrSessionReplaced) || protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
		t.Fatalf("Run: %v, want ErrSessionReplaced", err)
	}
	if st := tw.w.Status(); len(st.Running) != 0 || st.LastError == "" {
		t.Fatalf("old process status: %+v", st)
	}
	if got := h.history("wi-1"); len(got) != 1 {
		t.Fatalf("runs %v", got)
	}
}

func TestSessionEpochFile(t *testing.T) {
	dir := t.TempDir()
	if e, err := loadEpoch(dir); err != nil || e != 0 {
		t.Fatalf("fresh: %d %v", e, err)
	}
	for _, e := range []uint64{1, 7, 1 << 40} {
		if err := saveEpoch(dir, e); err != nil {
			t.Fatal(err)
		}
		if got, err := loadEpoch(dir); err != nil || got != e {
			t.Fatalf("reopened: %d %v, want %d", got, err, e)
		}
	}
	// No temporary file is left behind; a damaged file is an error, not 0.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files %v", ents)
	}
	if err := os.WriteFile(filepath.Join(dir, SessionFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadEpoch(dir); err == nil {
		t.Fatal("damaged session file accepted")
	}
}

func TestDetailUint(t *testing.T) {
	for _, tc := range []struct {
		v  any
		n  uint64
		ok bool
	}{
		{uint64(3), 3, true}, {int64(3), 3, true}, {3, 3, true}, {3.0, 3, true},
		{-1.0, 0, false}, {2.5, 0, false}, {int64(-2), 0, false}, {"3", 0, false}, {nil, 0, false},
	} {
		n, ok := detailUint(map[string]any{"k": tc.v}, "k")
		if n != tc.n || ok != tc.ok {
			t.Errorf("detailUint(%#v) = %d %v", tc.v, n, ok)
		}
	}
}

// A Group configured before the agent is a member is refused at first
// (GROUP_NOT_FOUND); the worker stays online and subscribes again until the
// membership exists.
func TestWorkerRetriesRejectedGroup(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Groups = []string{"grp-a"}
	tw := k.start(cfg)
	k.member("w1")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("subscribed again and running", func() bool {
		if len(tw.w.Status().Running) == 1 {
			return true
		}
		k.fc.Advance(100 * time.Millisecond)
		return false
	}, tw)
}
