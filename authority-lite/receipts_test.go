package authoritylite

import (
	"context"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// A retry is answered from the recent receipts or, once they have moved
// on, from the store; a different command under a used actionId is a
// collision either way; and a lookup made before a receipt was committed
// and evicted still finds it under the lock (the check re-reads the store
// when the recent receipts dropped anything since).
func TestRecentReceipts(t *testing.T) {
	tests := []struct {
		name string
		size int // recent receipts kept
	}{
		{"kept in memory", 64},
		{"evicted to the store", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			k.s.receipts.recent = newRecentReceipts(tc.size)
			act := func(e *protocol.Envelope) { e.ActionID = "act-post-1" }
			before := k.s.receipts.lookup(k.coord.Actor, "act-post-1")
			if before.found {
				t.Fatal("receipt found before the command")
			}
			_, raw, err := k.coord.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-1", Text: "one"}, act)
			if err != nil {
				t.Fatal(err)
			}
			first, err := k.s.Submit(context.Background(), "", raw)
			if err != nil {
				t.Fatal(err)
			}
			k.ok(k.coord, protocol.CmdMessagePost, &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-2", Text: "two"})
			_, inMemory, _ := k.s.receipts.recent.get(string(receiptKey(k.coord.Actor, "act-post-1")))
			if inMemory != (tc.size > 1) {
				t.Fatalf("receipt in memory: %v, want %v", inMemory, tc.size > 1)
			}
			if rec, ok := k.s.receipts.now(k.coord.Actor, "act-post-1", before); !ok || rec.Receipt.Events[0].EventID != first.Events[0].EventID {
				t.Fatalf("check after the earlier lookup: %v %+v, want the committed receipt", ok, rec)
			}
			again, err := k.s.Submit(context.Background(), "", raw)
			if err != nil || again.Events[0].EventID != first.Events[0].EventID {
				t.Fatalf("retry: %v %+v, want the first receipt", err, again)
			}
			k.refuse(k.coord, protocol.CmdMessagePost, &protocol.PostMessagePayload{ConversationID: "c", MessageID: "m-3", Text: "other"}, protocol.CodeActionIDCollision, act)
			if n := k.s.LastSequence("grp-a"); n != *first.Events[0].Sequence+1 {
				t.Fatalf("log ends at %d, want %d: one event per distinct command", n, *first.Events[0].Sequence+1)
			}
		})
	}
}

func TestRecentReceiptsEvictOldest(t *testing.T) {
	r := newRecentReceipts(2)
	for _, k := range []string{"a", "b", "a", "c"} {
		r.add(k, receiptRecord{Digest: k})
	}
	for _, tc := range []struct {
		key  string
		kept bool
	}{{"a", false}, {"b", true}, {"c", true}} {
		if _, ok, n := r.get(tc.key); ok != tc.kept || n != 1 {
			t.Errorf("%s: kept %v, evicted %d; want %v, 1", tc.key, ok, n, tc.kept)
		}
	}
}
