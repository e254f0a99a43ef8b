package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// countingStore counts the transactions the session asks for and what
// the store held durably at each.
type countingStore struct {
	*queue.Store
	commits int
}

func (c *countingStore) Commit(b queue.Batch) (queue.Result, error) {
	c.commits++
	return c.Store.Commit(b)
}

func (c *countingStore) outbox(t *testing.T) []string {
	t.Helper()
	var ids []string
	for e, err := range c.Outbox() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ActionID)
	}
	return ids
}

func eventItem(t *testing.T, raw []byte, i int) readItem {
	t.Helper()
	f, err := decodeInbound([]byte(fmt.Sprintf(`{"type":"EVENT","frameId":"s-%d","event":%s}`, i, raw)), protocol.DecodeOptions{}, authorityKeys())
	if err != nil {
		t.Fatal(err)
	}
	return readItem{f: f}
}

func receiptItem(t *testing.T, frameID, actionID string) readItem {
	t.Helper()
	b := fmt.Sprintf(`{"type":"ACK","frameId":"s-r-%s","inReplyTo":"%s","receipt":{"actionId":"%s","events":[]}}`, frameID, frameID, actionID)
	f, err := decodeInbound([]byte(b), protocol.DecodeOptions{}, authorityKeys())
	if err != nil {
		t.Fatal(err)
	}
	return readItem{f: f}
}

// A turn of the session loop commits everything that was waiting in one
// transaction, and writes nothing to the authority before it: a burst of
// events and Commands is one commit, then one ACK of the durable cursor,
// then the Commands, each already in the outbox; their receipts in the
// next turn are one more commit, and the waiters hear of them after it.
func TestTurnIsOneCommit(t *testing.T) {
	const events, cmds = 20, 3
	store := &countingStore{Store: openStore(t, t.TempDir())}
	defer store.Close()
	s, _ := testSession(t, store)
	defer s.fcancel()
	s.q = newCmdQueue() // without testSession's act-1
	s.in = make(chan readItem, events+cmds)
	var out []string // what reached the authority, and what was durable then
	s.send = func(_ context.Context, b []byte) error {
		var f struct {
			Type    protocol.FrameType `json:"type"`
			FrameID string             `json:"frameId"`
			Cursors []protocol.Cursor  `json:"cursors"`
			Command struct {
				ActionID string `json:"actionId"`
			} `json:"command"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case protocol.FrameAck:
			for _, c := range f.Cursors {
				out = append(out, fmt.Sprintf("ACK %d durable %d", c.Sequence, store.Cursor(c.GroupID)))
			}
		case protocol.FrameCommand:
			out = append(out, fmt.Sprintf("COMMAND %s in outbox %v", f.Command.ActionID, slices.Contains(store.outbox(t), f.Command.ActionID)))
		}
		return nil
	}
	for i, raw := range groupLog(t, "grp-a", events) {
		s.in <- eventItem(t, raw, i)
	}
	waiters := map[string]chan cmdResult{}
	for i := range cmds {
		id := fmt.Sprintf("act-%d", i)
		waiters[id] = make(chan cmdResult, 1)
		s.c.handed = append(s.c.handed, &pendingCmd{actionID: id, groupID: "grp-a", typ: protocol.CmdMessagePost, signed: signedCommand(t, id, "grp-a"), waiters: []chan cmdResult{waiters[id]}})
	}
	turn := func() {
		t.Helper()
		if err := s.onItem(<-s.in); err != nil {
			t.Fatal(err)
		}
		if err := s.drain(); err != nil {
			t.Fatal(err)
		}
		// Sending mid-turn (a pause ending on a tick) sends only what a
		// commit already made durable.
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.finish(); err != nil {
			t.Fatal(err)
		}
	}
	turn()
	want := []string{fmt.Sprintf("ACK %d durable %d", events, events)}
	for i := range cmds {
		want = append(want, fmt.Sprintf("COMMAND act-%d in outbox true", i))
	}
	if store.commits != 1 || !slices.Equal(out, want) {
		t.Fatalf("%d commits for %d events and %d Commands; wrote\n%v\nwant\n%v", store.commits, events, cmds, out, want)
	}

	frames := map[string]string{}
	for _, p := range s.q.list {
		frames[p.actionID] = p.frameID
	}
	for i := range cmds {
		id := fmt.Sprintf("act-%d", i)
		s.in <- receiptItem(t, frames[id], id)
	}
	turn()
	if store.commits != 2 {
		t.Fatalf("%d commits after the receipts' turn, want 2", store.commits)
	}
	if ids := store.outbox(t); len(ids) != 0 {
		t.Fatalf("answered Commands left in the outbox: %v", ids)
	}
	for id, w := range waiters {
		select {
		case r := <-w:
			if r.err != nil || r.receipt.ActionID != id {
				t.Fatalf("%s answered %+v", id, r)
			}
		default:
			t.Fatalf("%s: no answer after its turn", id)
		}
	}
}
