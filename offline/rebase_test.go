package offline

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Rebased commands verify under the new session, carry the binding (with
// its originalSessionEpoch and historical lease) and payload untouched, keep
// the actionId, and are fresh where the offline originals are stale.
func TestRebaseResigns(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	in := protocol.Inbound{Keys: protocol.NewKeySet(key.Public())}
	buf := openBuffer(t, tempDB(t), Limits{})
	groups := []string{"grp-a", "grp-b"}
	for i, typ := range []protocol.CommandType{protocol.CmdLeaseRenew, protocol.CmdWorkCheckpoint, protocol.CmdResourceUsageRecord, protocol.CmdMessagePost} {
		b := binding(time.Duration(i)*time.Second, protocol.Usage{Money: 0.1 * float64(i), Tokens: uint64(i)})
		b.GroupID = groups[i%2]
		raw, err := SignBuffered(command(t, typ, b, i), b, key)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, buf, raw)
	}
	now := at(20 * time.Minute)
	sess := CurrentSession{SessionEpoch: 7, MembershipEpochs: map[string]uint64{"grp-a": 2, "grp-b": 5}, Now: now}
	for _, e := range pending(t, buf) {
		if _, err := in.DecodeCommand(e.Signed, now); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
			t.Fatalf("%s: the offline original should be stale at reconnect, got %v", e.Type, err)
		}
		raw, err := Rebase(e, sess, key)
		if err != nil {
			t.Fatal(err)
		}
		ic, err := in.DecodeCommand(raw, now)
		if err != nil {
			t.Fatalf("%s: rebased command refused: %v", e.Type, err)
		}
		c, orig := ic.Command, decodeCommand(t, e.Signed)
		if c.ActionID != orig.ActionID || *c.SessionEpoch != 7 || *c.MembershipEpoch != sess.MembershipEpochs[e.GroupID] || !c.IssuedAt.Equal(now) {
			t.Fatalf("%s: rebased envelope %s session %d membership %d issuedAt %s", e.Type, c.ActionID, *c.SessionEpoch, *c.MembershipEpoch, c.IssuedAt)
		}
		if !bytes.Equal(canonical(t, c.Payload), canonical(t, orig.Payload)) {
			t.Fatalf("%s: payload changed", e.Type)
		}
		if !bytes.Equal(canonical(t, c.Extensions[protocol.OfflineExtensionURI].Data), canonical(t, orig.Extensions[protocol.OfflineExtensionURI].Data)) {
			t.Fatalf("%s: binding bytes changed", e.Type)
		}
		b, err := BindingOf(c)
		if err != nil || !sameBinding(b, e.Binding) || b.OriginalSessionEpoch != 3 {
			t.Fatalf("%s: binding %+v %v", e.Type, b, err)
		}
		if c.CorrelationID != orig.CorrelationID || c.Type != orig.Type || c.GroupID != orig.GroupID || c.Actor != orig.Actor {
			t.Fatalf("%s: other envelope members changed", e.Type)
		}
	}
}

func TestRebaseRefuses(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	e := mustAppend(t, openBuffer(t, tempDB(t), Limits{}), signedBuffered(t, key, 1))
	sess := CurrentSession{SessionEpoch: 4, MembershipEpochs: map[string]uint64{"grp-a": 1}, Now: at(time.Hour)}
	if _, err := Rebase(e, CurrentSession{SessionEpoch: 4, MembershipEpochs: map[string]uint64{"grp-b": 1}, Now: sess.Now}, key); protocol.CodeOf(err) != protocol.CodeMembershipRequired {
		t.Errorf("no membership in the Group: %v", err)
	}
	other, _ := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, "worker-2", "k1"), nil)
	if _, err := Rebase(e, sess, other); err == nil {
		t.Error("rebased with another principal's key")
	}
	tampered := e
	tampered.Binding.UsageDelta.Tokens++
	if _, err := Rebase(tampered, sess, key); err == nil {
		t.Error("rebased an entry whose binding does not match its signed bytes")
	}
	garbled := e
	garbled.Signed = []byte(`{}`)
	if _, err := Rebase(garbled, sess, key); err == nil {
		t.Error("rebased garbage")
	}
}

func TestPrepareReuse(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	in := protocol.Inbound{Keys: protocol.NewKeySet(key.Public())}
	s := func(session, membership uint64, d time.Duration) CurrentSession {
		return CurrentSession{SessionEpoch: session, MembershipEpochs: map[string]uint64{"grp-a": membership}, Now: at(time.Hour + d)}
	}
	for _, tc := range []struct {
		name string
		s    CurrentSession
		same bool
	}{
		{"same session, soon after", s(4, 1, ReuseRebasedFor-time.Millisecond), true},
		{"same session, too old to be fresh", s(4, 1, ReuseRebasedFor), false},
		{"new session", s(5, 1, time.Second), false},
		{"new membership epoch", s(4, 2, time.Second), false},
		{"clock behind the rebase", s(4, 1, -time.Second), false},
	} {
		buf := openBuffer(t, tempDB(t), Limits{})
		id := mustAppend(t, buf, signedBuffered(t, key, 1)).ID
		first, err := buf.Prepare(id, s(4, 1, 0), key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := buf.Prepare(id, tc.s, key)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got, first) != tc.same {
			t.Errorf("%s: reused %v, want %v", tc.name, !tc.same, tc.same)
		}
		// Reused bytes are still fresh to an authority whose clock runs up
		// to ReuseRebasedFor ahead (half the freshness window is left).
		if _, err := in.DecodeCommand(got, tc.s.Now.Add(ReuseRebasedFor)); err != nil {
			t.Errorf("%s: the bytes Prepare returned are refused: %v", tc.name, err)
		}
		if decodeCommand(t, got).ActionID != decodeCommand(t, first).ActionID {
			t.Errorf("%s: actionId changed", tc.name)
		}
		if e, err := buf.Get(id); err != nil || !bytes.Equal(e.Rebased.Raw, got) {
			t.Errorf("%s: returned bytes were not persisted first (%v)", tc.name, err)
		}
		if err := buf.Remove(id); err != nil {
			t.Fatal(err)
		}
		if _, err := buf.Prepare(id, tc.s, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("prepare of a removed entry: %v", err)
		}
	}
}

func decodeCommand(t testing.TB, raw []byte) *protocol.Command {
	t.Helper()
	var c protocol.Command
	if err := protocol.DecodeExact(raw, &c, protocol.CodeInvalidCommand); err != nil {
		t.Fatal(err)
	}
	return &c
}

func canonical(t testing.TB, raw []byte) []byte {
	t.Helper()
	c, err := protocol.CanonicalBytes(raw, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClassify(t *testing.T) {
	t.Parallel()
	freshness := protocol.Errorf(protocol.CodeAuthInvalidSignature, "stale").At("/issuedAt")
	wireFreshness := protocol.Errorf(protocol.CodeAuthInvalidSignature, "stale")
	wireFreshness.Details = map[string]any{"pointer": "/issuedAt"}
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Applied},
		{protocol.Errorf(protocol.CodeActionIDCollision, "x"), Applied},
		{protocol.Errorf(protocol.CodeBackpressure, "x"), Resend},
		{protocol.Errorf(protocol.CodeRateLimited, "x"), Resend},
		{protocol.Errorf(protocol.CodeInternalError, "x"), Resend},
		{errors.New("connection reset"), Resend},
		{protocol.Errorf(protocol.CodeAuthRequired, "x"), Retry},
		{protocol.Errorf(protocol.CodeAuthStaleSession, "x"), Retry},
		{protocol.Errorf(protocol.CodeMembershipStale, "x"), Retry},
		{freshness, Retry},
		{wireFreshness, Retry},
		{protocol.Errorf(protocol.CodeAuthInvalidSignature, "bad").At("/signature/value"), Refused},
		{protocol.Errorf(protocol.CodeWorkLeaseExpired, "x"), Refused},
		{protocol.Errorf(protocol.CodeWorkStaleOwnership, "x"), Refused},
		{protocol.Errorf(protocol.CodeBudgetExceeded, "x"), Refused},
		{protocol.Errorf(protocol.CodeInvalidCommand, "x"), Refused},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
