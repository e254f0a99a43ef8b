package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// sameSignedCommand signs a copy of cmd both ways (the one-pass writer and
// the general path through a parsed document) and reports how they differ.
func sameSignedCommand(cmd Command, k PrivateKey) (string, bool) {
	a, b := cmd, cmd
	got, gerr := SignedCommand(&a, k)
	want, werr := signedCommandGeneral(&b, k)
	switch {
	case (gerr == nil) != (werr == nil):
		return fmt.Sprintf("one-pass error %v, general error %v", gerr, werr), false
	case gerr != nil:
		return "", true
	case !bytes.Equal(got, want):
		return fmt.Sprintf("bytes differ\n one-pass %s\n general  %s", got, want), false
	case a.Signature != b.Signature:
		return fmt.Sprintf("Signature %+v, general %+v", a.Signature, b.Signature), false
	}
	return "", true
}

func typedCommand(payload string) Command {
	return Command{ActionID: "act-1", ProtocolVersion: Version, Actor: Actor{Kind: ActorAgent, ID: "w1"},
		Type: CmdWorkStart, GroupID: "g1", SessionEpoch: Uint64(1), MembershipEpoch: Uint64(2),
		CorrelationID: "m1", IssuedAt: NewTime(time.Date(2026, 11, 30, 8, 0, 0, 120e6, time.UTC)), Payload: json.RawMessage(payload)}
}

// TestSignedCommandTraps: payloads, strings, optional members and times
// that encoding/json and RFC 8785 treat differently give the general
// path's bytes, or its refusal.
func TestSignedCommandTraps(t *testing.T) {
	k := testEventKey(t)
	for _, p := range []string{
		`{"workItemId":"wi-1","ownershipEpoch":1}`, `{"text":"a<b && c>d","confidence":0.7}`,
		`{"text":"\u003cscript\u003e \u0026 \u2028\u2029"}`, "{\"text\":\"\u2028 raw \u2029\"}",
		`{"n":[-0,-0.0,1e21,1e-7,5e-324,4.50,1E+2,333333333.33333329]}`, `{"tooBig":9007199254740992}`, `{"over":1e400}`,
		`{"esc":"\"\\\/\b\f\n\r\t\u0000\u001f\u007f\u00e9\ud83d\ude00"}`, `{"lone":"\ud800"}`, `{"nonchar":"\uffff"}`, "{\"bad\":\"\xff\"}",
		`{"dup":1,"dup":2}`, "{\"\ue000\":1,\"\U0001F600\":2,\"a\":3,\"\":4}", ` { "b" : [ 1 , { "d" : true , "c" : null } ] , "a" : "x" } `,
		`{}`, `[]`, `null`, `12`, ``, `{`, `{"a":1}x`,
		strings.Repeat("[", 63) + strings.Repeat("]", 63), strings.Repeat("[", 64) + strings.Repeat("]", 64),
	} {
		if msg, ok := sameSignedCommand(typedCommand(p), k); !ok {
			t.Errorf("payload %q: %s", p, msg)
		}
	}
	cmd := typedCommand(`{}`)
	cmd.Payload = nil
	if msg, ok := sameSignedCommand(cmd, k); !ok {
		t.Errorf("nil payload: %s", msg)
	}
	for _, s := range []string{"", "a<b>&c", "\u2028\u2029", "\x00\x1f\"\\", "é😀\ue000", "\xff", "a\xed\xa0\x80b", "\ufffe", "\uFFFD"} {
		for _, edit := range []func(*Command){
			func(c *Command) { c.ActionID = s }, func(c *Command) { c.Actor.ID = s }, func(c *Command) { c.Actor.Kind = ActorKind(s) },
			func(c *Command) { c.CooperationOverrideGrantID = s }, func(c *Command) { c.CorrelationID = s },
			func(c *Command) { c.GroupID = s }, func(c *Command) { c.ProtocolVersion = s }, func(c *Command) { c.Type = CommandType(s) },
		} {
			cmd := typedCommand(`{"a":1}`)
			edit(&cmd)
			if msg, ok := sameSignedCommand(cmd, k); !ok {
				t.Errorf("string %q: %s", s, msg)
			}
		}
	}
	big, zero := uint64(MaxSafeInteger+1), uint64(0)
	for _, edit := range []func(*Command){
		func(c *Command) { c.SessionEpoch, c.MembershipEpoch = nil, nil },
		func(c *Command) { c.CoordinatorEpoch, c.ExpectedRevision = Uint64(3), &zero },
		func(c *Command) { c.ExpectedRevision = &big }, func(c *Command) { c.CoordinatorEpoch = &big },
		func(c *Command) { c.IssuedAt = Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} },
		func(c *Command) { c.IssuedAt = Time{time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} },
		func(c *Command) {
			c.IssuedAt = Time{time.Date(2026, 1, 1, 8, 0, 0, 123456789, time.FixedZone("x", 3600))}
		},
		func(c *Command) { c.IssuedAt = Time{} },
	} {
		cmd := typedCommand(`{"a":1}`)
		edit(&cmd)
		if msg, ok := sameSignedCommand(cmd, k); !ok {
			t.Errorf("envelope %+v: %s", cmd, msg)
		}
	}
	if _, err := SignedCommand(new(Command), PrivateKey{KeyID: "bad id"}); err == nil {
		t.Error("signed with an invalid key")
	}
}

// TestSignedCommandProperty compares the two paths on random envelopes
// and payloads (Go values encoding/json writes, and random JSON texts).
func TestSignedCommandProperty(t *testing.T) {
	k := testEventKey(t)
	rapid.Check(t, func(rt *rapid.T) {
		cmd := typedCommand(`{}`)
		cmd.ActionID = anyString().Draw(rt, "actionId")
		cmd.Actor = Actor{Kind: ActorKind(anyString().Draw(rt, "kind")), ID: anyString().Draw(rt, "actor")}
		cmd.Type = CommandType(anyString().Draw(rt, "type"))
		cmd.CorrelationID = anyString().Draw(rt, "correlationId")
		cmd.GroupID = anyString().Draw(rt, "groupId")
		cmd.CooperationOverrideGrantID = anyString().Draw(rt, "grant")
		cmd.ProtocolVersion = anyString().Draw(rt, "version")
		opt := func(name string) *uint64 {
			if rapid.Bool().Draw(rt, name+"?") {
				v := anyUint().Draw(rt, name)
				return &v
			}
			return nil
		}
		cmd.SessionEpoch, cmd.MembershipEpoch = opt("sessionEpoch"), opt("membershipEpoch")
		cmd.CoordinatorEpoch, cmd.ExpectedRevision = opt("coordinatorEpoch"), opt("expectedRevision")
		cmd.IssuedAt = Time{time.Unix(rapid.Int64Range(-62167219200-86400, 253402300799+86400).Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "nsec")).UTC()}
		if rapid.Bool().Draw(rt, "goValue") {
			raw, err := json.Marshal(jsonValue(4).Draw(rt, "payload"))
			if err != nil {
				rt.Skip("not marshalable")
			}
			cmd.Payload = raw
		} else {
			cmd.Payload = []byte(jsonText(4).Draw(rt, "payload"))
		}
		if msg, ok := sameSignedCommand(cmd, k); !ok {
			rt.Fatal(msg)
		}
	})
}

// BenchmarkSignedCommand times the one-pass path and the general one in
// alternating chunks and reports the one-pass path's share of the
// general path's time and of Ed25519 signing alone.
func BenchmarkSignedCommand(b *testing.B) {
	k := testEventKey(b)
	base := typedCommand(`{"workItemId":"wi-1","ownershipEpoch":1,"leaseId":"lease-1","evidence":[{"subject":"wi-1","criteria":["ac-1"],"method":"go test","result":"pass"}]}`)
	input, _, _ := appendUnsignedCommand(nil, &base)
	ways := []func(){
		func() {
			c := base
			if _, err := SignedCommand(&c, k); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			c := base
			if _, err := signedCommandGeneral(&c, k); err != nil {
				b.Fatal(err)
			}
		},
		func() { spliceValue(k, append([]byte(nil), input...), len(input)-1) },
	}
	spent := make([]time.Duration, len(ways))
	for i := 0; i < b.N; i += 64 {
		for w, way := range ways {
			start := time.Now()
			for range min(64, b.N-i) {
				way()
			}
			spent[w] += time.Since(start)
		}
	}
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "x_general")
	b.ReportMetric(float64(spent[0])/float64(spent[2]), "x_sign_alone")
}
