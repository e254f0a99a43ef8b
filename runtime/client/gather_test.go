package client

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A turn smaller than half of what the last commit served keeps gathering
// (the events of the authority's next transaction, the Commands the
// runtime hands for those just applied) and commits with them; a lone flow,
// whose every commit serves one thing, never waits.
func TestSmallTurnGathers(t *testing.T) {
	s, store := countingSession(t)
	log := groupLog(t, "grp-a", 10)
	next := 0
	push := func(n int) {
		t.Helper()
		for range n {
			s.in <- eventItem(t, log[next], next)
			next++
		}
		if err := s.onItem(<-s.in); err != nil {
			t.Fatal(err)
		}
		if err := s.drain(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func() {
		t.Helper()
		if err := s.finish(); err != nil {
			t.Fatal(err)
		}
	}

	push(6)
	commit() // serves 6
	push(1)
	if !s.holdTurn() {
		t.Fatal("a turn of 1 after a commit of 6 did not wait for more")
	}
	push(1)
	if !s.holdTurn() {
		t.Fatal("a turn of 2 after a commit of 6 did not wait for more")
	}
	push(1)
	if s.holdTurn() {
		t.Fatal("a turn of 3, half of the last commit's 6, still waits")
	}
	commit()
	if store.commits != 2 || store.Cursor("grp-a") != 9 {
		t.Fatalf("%d commits, cursor %d; want 2 commits up to 9", store.commits, store.Cursor("grp-a"))
	}

	// The last commit served 3: a turn of 1 waits, and not once its
	// wait has run out.
	push(1)
	if !s.holdTurn() {
		t.Fatal("a turn of 1 after a commit of 3 did not wait")
	}
	s.gather.timer, s.gather.expired = nil, true
	if s.holdTurn() {
		t.Fatal("the turn still waits after its wait ran out")
	}
	commit()

	// A lone flow: the commit served 1, the next turn of 1 goes at once.
	s.in <- receiptItem(t, "f-1", "act-1")
	if err := s.onItem(<-s.in); err != nil {
		t.Fatal(err)
	}
	if s.holdTurn() {
		t.Fatal("a turn of 1 after a commit of 1 waits")
	}
}

// The loop commits a held turn once its wait runs out, with nothing more
// arriving.
func TestHeldTurnCommitsWhenItsWaitEnds(t *testing.T) {
	s, store := countingSession(t)
	s.gather.seen, s.gather.took = 64, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.loop(ctx) }()
	s.in <- eventItem(t, groupLog(t, "grp-a", 1)[0], 0)
	deadline := time.Now().Add(10 * time.Second)
	for store.Cursor("grp-a") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the held turn was never committed")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A turn answering a Command waits for the events its receipt names, so
// the answer and its events share a commit; events already durable, or of
// a Group it does not follow, are not waited for.
func TestAnswerWaitsForItsEvents(t *testing.T) {
	s, store := countingSession(t)
	s.gather.took = time.Hour
	log := groupLog(t, "grp-a", 2)
	answer := func(refs string) {
		t.Helper()
		p := &pendingCmd{actionID: "act-9", groupID: "grp-a", signed: signedCommand(t, "act-9", "grp-a"), waiters: []chan cmdResult{make(chan cmdResult, 1)}}
		s.q.add(p)
		s.q.sent(p, "f-9")
		b := `{"type":"ACK","frameId":"s-r-9","inReplyTo":"f-9","receipt":{"actionId":"act-9","events":[` + refs + `]}}`
		f, err := decodeInbound([]byte(b), protocol.DecodeOptions{}, authorityKeys())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.onItem(readItem{f: f}); err != nil {
			t.Fatal(err)
		}
	}
	answer(`{"eventId":"e-1","groupId":"grp-a","sequence":1}`)
	if !s.holdTurn() {
		t.Fatal("the answer did not wait for the event its receipt names")
	}
	s.in <- eventItem(t, log[0], 0)
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
	if s.holdTurn() {
		t.Fatal("the turn still waits with the named event in it")
	}
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if store.commits != 1 || store.Cursor("grp-a") != 1 {
		t.Fatalf("%d commits, cursor %d; want the answer and its event in one", store.commits, store.Cursor("grp-a"))
	}
	for _, refs := range []string{
		`{"eventId":"e-1","groupId":"grp-a","sequence":1}`, // durable already
		`{"eventId":"e-7","groupId":"grp-z","sequence":7}`, // a Group not followed
		`{"eventId":"e-8"}`, // no position
	} {
		answer(refs)
		if s.holdTurn() {
			t.Fatalf("an answer naming %s waits", refs)
		}
		if err := s.finish(); err != nil {
			t.Fatal(err)
		}
	}
}

// countingSession is a test session over a store that counts its commits.
func countingSession(t *testing.T) (*session, *countingStore) {
	t.Helper()
	store := &countingStore{Store: openStore(t, t.TempDir())}
	t.Cleanup(func() { store.Close() })
	s, _ := testSession(t, store)
	t.Cleanup(s.fcancel)
	s.in = make(chan readItem, 16)
	return s, store
}
