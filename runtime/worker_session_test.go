package runtime

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A second process of the same agent opens a newer session: the first one's
// lease is revoked, its slot stops at a safe point and its Run returns
// ErrSessionReplaced once the authority refuses its stale session.
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
	if w := k.item("wi-1"); w.State != protocol.WorkQueued || w.Lease != nil {
		t.Fatalf("replacement did not revoke the lease: %s %v", w.State, w.Lease)
	}
	// The old process learns it on its next HELLO.
	k.px.cut()
	k.px.restore()
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
	if !errors.Is(err, ErrSessionReplaced) || protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
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

func TestMembershipOf(t *testing.T) {
	ev := func(typ, kind, id, state string, epoch int) []byte {
		return []byte(`{"type":"` + typ + `","payload":{"principal":{"kind":"` + kind + `","id":"` + id + `"},"state":"` + state + `","membershipEpoch":` + itoa(epoch) + `}}`)
	}
	for _, tc := range []struct {
		name  string
		raw   []byte
		epoch uint64
		ended bool
		ok    bool
	}{
		{"changed", ev("membership.changed", "agent", "w1", "active", 3), 3, false, true},
		{"ended", ev("membership.ended", "agent", "w1", "ended", 4), 4, true, true},
		{"another agent", ev("membership.changed", "agent", "w2", "active", 1), 0, false, false},
		{"a human of the same id", ev("membership.changed", "human", "w1", "active", 1), 0, false, false},
		{"another event", []byte(`{"type":"work.started","payload":{"note":"membership.changed"}}`), 0, false, false},
		{"garbage", []byte(`"membership.`), 0, false, false},
	} {
		e, ended, ok := membershipOf(tc.raw, "w1")
		if e != tc.epoch || ended != tc.ended || ok != tc.ok {
			t.Errorf("%s: %d %v %v", tc.name, e, ended, ok)
		}
	}
}

// FuzzMembershipOf: event bytes from the store never panic the reader, and
// an answer is only ever about agent w1's membership.
func FuzzMembershipOf(f *testing.F) {
	f.Add([]byte(`{"type":"membership.changed","payload":{"principal":{"kind":"agent","id":"w1"},"state":"active","membershipEpoch":2}}`))
	f.Add([]byte(`{"type":"membership.ended","payload":{}}`))
	f.Add([]byte(`"membership.`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		epoch, _, ok := membershipOf(raw, "w1")
		if !ok {
			return
		}
		var ev struct {
			Type    string `json:"type"`
			Payload struct {
				Principal       protocol.Actor `json:"principal"`
				MembershipEpoch uint64         `json:"membershipEpoch"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil || ev.Payload.Principal != (protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}) ||
			!strings.HasPrefix(ev.Type, "membership.") || ev.Payload.MembershipEpoch != epoch {
			t.Fatalf("answered %d for %q", epoch, raw)
		}
	})
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
