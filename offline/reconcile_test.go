package offline

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/protocol"
)

// fakeAuthority is the part of a Group Authority that reconciliation meets:
// the inbound pipeline, (actor, actionId) receipts (spec 15.1), session and
// membership epochs, CheckBuffered, and the offline charge. It keeps a
// receipt only for an accepted command.
type fakeAuthority struct {
	in            protocol.Inbound
	session       uint64
	membership    uint64
	receiptsFirst bool // answer a byte-identical retry before the freshness check
	hist          LeaseHistory
	receipts      map[string][]byte
	charges       map[string]int
	usage         protocol.Usage
}

func (a *fakeAuthority) handle(raw []byte, now time.Time) error {
	if a.receiptsFirst {
		if done, err := a.replay(raw); done {
			return err
		}
	}
	ic, err := a.in.DecodeCommand(raw, now)
	if err != nil {
		return err
	}
	canon, err := ic.CanonicalBytes()
	if err != nil {
		return err
	}
	if done, err := a.replay(canon); done {
		return err
	}
	c := ic.Command
	if *c.SessionEpoch != a.session {
		return protocol.Errorf(protocol.CodeAuthStaleSession, "session %d", *c.SessionEpoch)
	}
	if *c.MembershipEpoch != a.membership {
		return protocol.Errorf(protocol.CodeMembershipStale, "membership %d", *c.MembershipEpoch)
	}
	b, err := BindingOf(c)
	if err != nil {
		return err
	}
	if err := CheckBuffered(b, a.hist, now); err != nil {
		return err
	}
	a.receipts[c.ActionID] = canon
	a.charges[c.ActionID]++
	a.usage = a.usage.Add(b.UsageDelta)
	return nil
}

// replay answers a known actionId: the original receipt for the same bytes,
// ACTION_ID_COLLISION for other bytes.
func (a *fakeAuthority) replay(raw []byte) (bool, error) {
	canon, err := protocol.CanonicalBytes(raw, protocol.DecodeOptions{})
	if err != nil {
		return false, nil
	}
	var c protocol.Command
	if protocol.DecodeExact(canon, &c, protocol.CodeInvalidCommand) != nil {
		return false, nil
	}
	prev, ok := a.receipts[c.ActionID]
	switch {
	case !ok:
		return false, nil
	case bytes.Equal(prev, canon):
		return true, nil
	}
	return true, protocol.Errorf(protocol.CodeActionIDCollision, "actionId %s", c.ActionID)
}

// Reconciliation with lost receipts, disconnects, new sessions, restarts and
// time passing charges every buffered command exactly once and settles the
// buffer in order.
func TestReconcileNeverDoubleCharges(t *testing.T) {
	key := testKey(t)
	rapid.Check(t, func(rt *rapid.T) {
		path := filepath.Join(t.TempDir(), "worker.db")
		db := openDB(t, path, true)
		buf := openBuffer(t, db, Limits{})
		n := rapid.IntRange(1, 6).Draw(rt, "buffered")
		var want protocol.Usage
		order := map[string]int{}
		for i := range n {
			e := mustAppend(t, buf, signedBuffered(t, key, i))
			want = want.Add(e.Binding.UsageDelta)
			order[e.ActionID] = i
		}
		auth := &fakeAuthority{
			in: protocol.Inbound{Keys: protocol.NewKeySet(key.Public())}, session: 4, membership: 1,
			receiptsFirst: rapid.Bool().Draw(rt, "receiptsFirst"), hist: historyOf(testLease()),
			receipts: map[string][]byte{}, charges: map[string]int{},
		}
		now, connected := at(5*time.Minute), true
		lastApplied := -1
		send := func(loseReceipt bool) {
			es := pending(t, buf)
			if len(es) == 0 {
				return
			}
			e := es[0] // strictly in order
			s := CurrentSession{SessionEpoch: auth.session, MembershipEpochs: map[string]uint64{"grp-a": auth.membership}, Now: now}
			raw, err := buf.Prepare(e.ID, s, key)
			if err != nil {
				rt.Fatal(err)
			}
			res := auth.handle(raw, now)
			if loseReceipt {
				connected = false
				return
			}
			switch Classify(res) {
			case Applied:
				if order[e.ActionID] <= lastApplied {
					rt.Fatalf("%s settled out of order", e.ActionID)
				}
				lastApplied = order[e.ActionID]
				if err := buf.Remove(e.ID); err != nil {
					rt.Fatal(err)
				}
			case Refused:
				rt.Fatalf("%s refused: %v", e.ActionID, res)
			}
		}
		for range rapid.IntRange(0, 30).Draw(rt, "steps") {
			switch rapid.SampledFrom([]string{"send", "send", "lose", "disconnect", "reconnect", "newSession", "wait", "restart"}).Draw(rt, "op") {
			case "send":
				if connected {
					send(false)
				}
			case "lose":
				if connected {
					send(true)
				}
			case "disconnect":
				connected = false
			case "reconnect":
				connected = true
			case "newSession":
				auth.session++
				if rapid.Bool().Draw(rt, "membershipChange") {
					auth.membership++
				}
				connected = true
			case "wait":
				now = now.Add(time.Duration(rapid.IntRange(0, 180).Draw(rt, "seconds")) * time.Second)
			case "restart":
				checkAndClose(t, db)
				db = openDB(t, path, true)
				buf = openBuffer(t, db, Limits{})
			}
			for id, c := range auth.charges {
				if c > 1 {
					rt.Fatalf("%s charged %d times", id, c)
				}
			}
		}
		connected = true
		for range 3 * n {
			send(false)
		}
		if es := pending(t, buf); len(es) != 0 {
			rt.Fatalf("%d commands never settled", len(es))
		}
		if len(auth.charges) != n || auth.usage != want {
			rt.Fatalf("charged %d commands with %+v, want %d with %+v", len(auth.charges), auth.usage, n, want)
		}
	})
}

// The same double-charge scenario written out: the receipt of a rebased
// command is lost, the worker reconnects under a new session and rebases the
// same entry again; the authority recognizes the actionId and the entry is
// settled without a second charge.
func TestSecondDisconnectDuringReconcile(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	buf := openBuffer(t, tempDB(t), Limits{})
	e := mustAppend(t, buf, signedBuffered(t, key, 1))
	auth := &fakeAuthority{in: protocol.Inbound{Keys: protocol.NewKeySet(key.Public())}, session: 4, membership: 1,
		hist: historyOf(testLease()), receipts: map[string][]byte{}, charges: map[string]int{}}
	now := at(10 * time.Minute)
	sess := func() CurrentSession {
		return CurrentSession{SessionEpoch: auth.session, MembershipEpochs: map[string]uint64{"grp-a": 1}, Now: now}
	}
	first, err := buf.Prepare(e.ID, sess(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.handle(first, now); err != nil {
		t.Fatal(err)
	}
	// Receipt lost; the same session comes back 10 s later: same bytes,
	// original receipt.
	now = now.Add(10 * time.Second)
	again, _ := buf.Prepare(e.ID, sess(), key)
	if !bytes.Equal(again, first) {
		t.Fatal("resend in the same session is not byte-identical")
	}
	if err := auth.handle(again, now); Classify(err) != Applied || err != nil {
		t.Fatalf("byte-identical resend: %v", err)
	}
	// Lost again; this time a replacement session.
	auth.session, now = 5, now.Add(time.Minute)
	third, _ := buf.Prepare(e.ID, sess(), key)
	if bytes.Equal(third, first) {
		t.Fatal("not rebased for the new session")
	}
	err = auth.handle(third, now)
	if protocol.CodeOf(err) != protocol.CodeActionIDCollision || Classify(err) != Applied {
		t.Fatalf("rebase after an accepted rebase: %v (%s)", err, Classify(err))
	}
	if auth.charges[e.ActionID] != 1 {
		t.Fatalf("charged %d times", auth.charges[e.ActionID])
	}
	if fmt.Sprint(NonZeroDimensions(auth.usage)) != "[tokens computeSeconds]" {
		t.Fatalf("charged %+v", auth.usage)
	}
}
