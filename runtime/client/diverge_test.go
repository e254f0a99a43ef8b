package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// refuseAhead answers a SUBSCRIBE or ACK naming a position past its
// Group's log with PROTOCOL_VIOLATION ahead_of_log, as authority-lite does
// (fs.heads); it reports whether it did.
func (sc *serverConn) refuseAhead(frameID string, cs []protocol.Cursor) bool {
	fs := sc.fs
	fs.mu.Lock()
	var e *protocol.Error
	if fs.heads {
		for _, c := range cs {
			if last := uint64(len(fs.logs[c.GroupID])); c.Sequence > last {
				e = protocol.WithDetails(protocol.Errorf(protocol.CodeProtocolViolation, "position %d is past the log", c.Sequence),
					"groupId", c.GroupID, "reason", "ahead_of_log", "sequence", c.Sequence, "lastSequence", last)
				fs.aheads++
				break
			}
		}
	}
	fs.notifyLocked()
	fs.mu.Unlock()
	if e != nil {
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID, Error: e})
	}
	return e != nil
}

// restoredLog is the log of an authority restored from a copy at sequence
// at, which then issued n events of its own: the first at sequences of
// log are its bytes, the rest other documents.
func restoredLog(t *testing.T, group string, log [][]byte, at, n int) [][]byte {
	t.Helper()
	out := slices.Clone(log[:at])
	for i := range n {
		seq := uint64(at + i + 1)
		rev := uint64(1)
		id := fmt.Sprintf("msg-r-%d", seq)
		p, _ := json.Marshal(map[string]any{"messageId": id, "author": protocol.Actor{Kind: protocol.ActorAgent, ID: "coord-1"}, "text": "restored", "state": "posted"})
		ev := protocol.Event{
			EventID: fmt.Sprintf("evt-%s-r-%d", group, seq), GroupID: group, Sequence: &seq,
			Aggregate: &protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id}, Revision: &rev, Type: protocol.EvtMessagePosted,
			Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord-1"}, CausationID: fmt.Sprintf("act-r-%d", seq), CorrelationID: "mis-" + group,
			OccurredAt: protocol.NewTime(t0), AcceptedBy: "authority-1", Payload: p,
		}
		raw, err := protocol.SignedEvent(&ev, authorityKey)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// A worker that applied 10 events of grp-a meets an authority whose log is
// another: restored from a copy (at), then grown by its own events (grown).
// It must stop the Group on the first connection, whichever way the
// authority's log differs, apply nothing of the authority's own history,
// and not subscribe the Group again; an authority with the worker's very
// history (or that history grown) is no divergence.
func TestDivergenceOnSubscribe(t *testing.T) {
	const cursor = 10
	cases := []struct {
		name      string
		at, grown int
		wantSeq   uint64 // first diverged sequence; 0: no divergence
		wantAhead bool   // found by the authority's ahead_of_log, not by comparing
		wantFinal uint64 // the cursor in the end
	}{
		{"the same log", cursor, 0, 0, false, cursor},
		{"the same log, grown", cursor, 4, 0, false, cursor + 4},
		{"restored far behind the cursor: SUBSCRIBE past the log", 3, 0, 4, true, cursor},
		{"restored within the overlap: the cursor's ACK past the log", 8, 0, 9, true, cursor},
		{"restored within the overlap, then grown past the cursor: compared", 8, 5, 9, false, cursor},
		{"restored below the overlap, then grown past the cursor: compared", 2, 12, cursor - queue.OverlapEvents + 1, false, cursor},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			fs := newFakeServer(t, nil)
			fs.heads = true
			logA := groupLog(t, "grp-a", 14)
			fs.setLog("grp-a", restoredLog(t, "grp-a", logA, c.at, c.grown))
			store := openStore(t, t.TempDir())
			defer store.Close()
			applyRaw(t, store, logA[:cursor]...)
			var mu sync.Mutex
			var told []queue.Divergence
			r := startClient(t, fs, Config{Store: store, OnApplied: func(res queue.Result) {
				mu.Lock()
				told = append(told, res.Diverged...)
				mu.Unlock()
			}})
			r.connected(t)
			if c.wantSeq == 0 {
				waitFor(t, r.sig, "caught up", func() bool { return store.Cursor("grp-a") == c.wantFinal })
				if _, ok := store.Divergence("grp-a"); ok {
					t.Fatal("the same history diverged")
				}
				return
			}
			waitFor(t, r.sig, "the divergence", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(told) > 0
			})
			d, ok := store.Divergence("grp-a")
			if !ok || d.Sequence != c.wantSeq || (d.AuthorityLastSequence != nil) != c.wantAhead {
				t.Fatalf("divergence %+v %v, want at %d (ahead %v)", d, ok, c.wantSeq, c.wantAhead)
			}
			mu.Lock()
			if len(told) != 1 || told[0].Sequence != d.Sequence {
				t.Fatalf("OnApplied told %+v", told)
			}
			mu.Unlock()
			if store.Cursor("grp-a") != c.wantFinal {
				t.Fatalf("cursor %d: the authority's history was applied", store.Cursor("grp-a"))
			}
			for seq := c.at + 1; seq <= cursor; seq++ {
				if raw, _ := store.Event("grp-a", uint64(seq)); string(raw) != string(logA[seq-1]) {
					t.Fatalf("event %d was replaced", seq)
				}
			}
			// A reconnect does not subscribe the Group again.
			fs.mu.Lock()
			subs := len(fs.subs)
			fs.mu.Unlock()
			fs.kill()
			waitFor(t, r.sig, "the second HELLO", func() bool {
				h, _, _, _ := fs.snapshot()
				return h == 2 && r.c.State() == StateConnected
			})
			r.c.AddGroup("grp-a") // as a GROUPS frame naming it would
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if len(fs.subs) != subs {
				t.Fatalf("the diverged Group was subscribed again: %+v", fs.subs[subs:])
			}
		})
	}
}

// An authority that compacted its log no longer holds the whole overlap
// online: CURSOR_TOO_OLD for the SUBSCRIBE below the cursor says nothing
// about the cursor itself. The worker subscribes again from the first
// online event when the authority names it (what is online is still
// compared), else from its cursor; no snapshot is restored, the Group is
// not rejected.
func TestOverlapCompactedAway(t *testing.T) {
	const cursor = 10
	logA := groupLog(t, "grp-a", 14)
	cases := []struct {
		name      string
		tellFirst bool
		log       [][]byte
		wantSubs  []uint64
		wantDiv   uint64 // 0: none
	}{
		{"first online not named", false, logA, []uint64{cursor - queue.OverlapEvents, cursor}, 0},
		{"first online named", true, logA, []uint64{cursor - queue.OverlapEvents, 8}, 0},
		{"first online named, and it differs", true, restoredLog(t, "grp-a", logA, 8, 6), []uint64{cursor - queue.OverlapEvents, 8}, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			fs := newFakeServer(t, nil)
			fs.heads, fs.tellFirst = true, c.tellFirst
			fs.setLog("grp-a", c.log)
			// Online from 9: CURSOR_TOO_OLD below 8.
			fs.tooOld["grp-a"] = protocol.SnapshotRef{SnapshotID: "snap-1", GroupID: "grp-a", Sequence: 8, Digest: protocol.Digest([]byte("x")), URI: "mwp-snapshot:x"}
			store := openStore(t, t.TempDir())
			defer store.Close()
			applyRaw(t, store, logA[:cursor]...)
			r := startClient(t, fs, Config{Store: store})
			waitFor(t, r.sig, "caught up or diverged", func() bool {
				_, div := store.Divergence("grp-a")
				return store.Cursor("grp-a") == 14 || div
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			d, div := store.Divergence("grp-a")
			if div != (c.wantDiv != 0) || (div && d.Sequence != c.wantDiv) || r.st.count(StateGroupRejected) != 0 {
				t.Fatalf("divergence %+v %v (want at %d), states %v", d, div, c.wantDiv, r.st.all)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			var subs []uint64
			for _, gp := range fs.subs {
				subs = append(subs, gp.AfterSequence)
			}
			if !slices.Equal(subs, c.wantSubs) {
				t.Fatalf("SUBSCRIBE positions %v, want %v", subs, c.wantSubs)
			}
		})
	}
}

// Only a well-formed ahead_of_log refusal names a Group to stop: another
// code, another reason, no Group or a last sequence that is not a
// non-negative integer is an ordinary error.
func TestAheadOfLogReading(t *testing.T) {
	mk := func(code protocol.Code, kv ...any) *protocol.Error {
		return protocol.WithDetails(protocol.Errorf(code, "x"), kv...)
	}
	cases := []struct {
		name  string
		e     *protocol.Error
		group string
		last  uint64
		ok    bool
	}{
		{"well formed", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "groupId", "g", "lastSequence", 12.0), "g", 12, true},
		{"a json.Number", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "groupId", "g", "lastSequence", json.Number("0")), "g", 0, true},
		{"another code", mk(protocol.CodeCursorTooOld, "reason", "ahead_of_log", "groupId", "g", "lastSequence", 12.0), "", 0, false},
		{"another reason", mk(protocol.CodeProtocolViolation, "reason", "bad_frame", "groupId", "g", "lastSequence", 12.0), "", 0, false},
		{"no Group", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "lastSequence", 12.0), "", 0, false},
		{"no last sequence", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "groupId", "g"), "", 0, false},
		{"a negative last sequence", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "groupId", "g", "lastSequence", -1.0), "", 0, false},
		{"a fractional last sequence", mk(protocol.CodeProtocolViolation, "reason", "ahead_of_log", "groupId", "g", "lastSequence", 1.5), "", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, last, ok := aheadOfLog(c.e)
			if g != c.group || last != c.last || ok != c.ok {
				t.Fatalf("aheadOfLog = %q %d %v, want %q %d %v", g, last, ok, c.group, c.last, c.ok)
			}
		})
	}
}
