package client

import (
	"context"
	"testing"
	"time"
)

// A turn smaller than half of what the last commit served keeps gathering
// (the events of the authority's next transaction, the Commands the
// runtime hands for those just applied) and commits with them; a lone flow,
// whose every commit serves one thing, never waits.
func TestSmallTurnGathers(t *testing.T) {
	store := &countingStore{Store: openStore(t, t.TempDir())}
	defer store.Close()
	s, _ := testSession(t, store)
	defer s.fcancel()
	s.in = make(chan readItem, 16)
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
	store := &countingStore{Store: openStore(t, t.TempDir())}
	defer store.Close()
	s, _ := testSession(t, store)
	defer s.fcancel()
	s.in = make(chan readItem, 4)
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
