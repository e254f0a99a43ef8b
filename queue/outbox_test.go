package queue

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

func command(actionID, typ string) []byte {
	// Key order and spacing as a peer might send them: the outbox keeps the
	// exact bytes, not a re-encoding.
	return []byte(fmt.Sprintf(`{"type": "%s", "actionId": "%s", "groupId": "grp-a", "payload": {"note": "<&>"}}`, typ, actionID))
}

func TestOutboxSurvivesRestartWithIdenticalBytes(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	s := openTest(t, dir, Options{NoSocket: true, Clock: clk})
	for i, typ := range []string{"work.accept_offer", "work.start", "work.checkpoint"} {
		clk.Advance(time.Second)
		if err := s.PutOutbox(fmt.Sprintf("act-%d", 3-i), command(fmt.Sprintf("act-%d", 3-i), typ)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AckOutbox("act-2"); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, s)

	s = openTest(t, dir, Options{NoSocket: true})
	var got []OutboxEntry
	for e, err := range s.Outbox() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		// The loop body may write: Outbox read everything first.
		if err := s.PutOutbox("act-9", command("act-9", "work.submit")); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		id, typ string
		at      time.Time
	}{{"act-3", "work.accept_offer", t0.Add(time.Second)}, {"act-1", "work.checkpoint", t0.Add(3 * time.Second)}}
	if len(got) != len(want) {
		t.Fatalf("outbox = %+v", got)
	}
	for i, w := range want {
		e := got[i]
		if e.ActionID != w.id || string(e.Type) != w.typ || e.GroupID != "grp-a" || !e.PutAt.Equal(w.at) || !bytes.Equal(e.Signed, command(w.id, w.typ)) {
			t.Errorf("entry %d = %+v %s, want %s %s", i, e, e.Signed, w.id, w.typ)
		}
	}
}

func TestPutOutboxRules(t *testing.T) {
	s := openTest(t, t.TempDir(), fast)
	if err := s.PutOutbox("act-1", command("act-1", "work.start")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		actionID string
		bytes    []byte
		want     protocol.Code // "" means accepted
	}{
		{"same bytes again is a no-op", "act-1", command("act-1", "work.start"), ""},
		{"other bytes under a used actionId", "act-1", command("act-1", "work.submit"), protocol.CodeActionIDCollision},
		{"actionId mismatch", "act-2", command("act-1", "work.start"), protocol.CodeInvalidCommand},
		{"empty actionId", "", []byte(`{"actionId":""}`), protocol.CodeInvalidCommand},
		{"not an object", "act-3", []byte(`["act-3"]`), protocol.CodeInvalidCommand},
		{"not strict JSON", "act-3", []byte(`{"actionId":"act-3","actionId":"act-3"}`), protocol.CodeProtocolViolation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.PutOutbox(tc.actionID, tc.bytes)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if protocol.CodeOf(err) != tc.want || err == nil {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
			n := 0
			for e, err := range s.Outbox() {
				if err != nil || !bytes.Equal(e.Signed, command("act-1", "work.start")) {
					t.Fatalf("outbox entry %+v %v changed", e, err)
				}
				n++
			}
			if n != 1 {
				t.Fatalf("outbox holds %d entries", n)
			}
		})
	}
	if err := s.AckOutbox("act-unknown"); err != nil {
		t.Fatalf("ack of an unknown actionId: %v", err)
	}
}
