package client

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/queue"
)

// putLog records how many outbox puts each store transaction carried.
type putLog struct {
	*queue.Store
	mu   sync.Mutex
	puts []int // one per transaction with puts
}

func (l *putLog) Commit(b queue.Batch) (queue.Result, error) {
	if len(b.Puts) > 0 {
		l.mu.Lock()
		l.puts = append(l.puts, len(b.Puts))
		l.mu.Unlock()
	}
	return l.Store.Commit(b)
}

func (l *putLog) batches() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.puts)
}

// heldClient is a connected client whose store has applied grp-a's first
// three events; events[3] is the fourth, not yet sent.
func heldClient(t *testing.T) (*running, *putLog, *fakeServer, [][]byte) {
	t.Helper()
	fs := newFakeServer(t, nil)
	events := groupLog(t, "grp-a", 4)
	fs.setLog("grp-a", events[:3])
	store := &putLog{Store: openStore(t, t.TempDir())}
	t.Cleanup(func() { store.Close() })
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	r.connected(t)
	waitFor(t, r.sig, "the log applied", func() bool { return store.Cursor("grp-a") == 3 })
	return r, store, fs, events
}

// Commands handed under a Hold are neither recorded nor sent while it
// lasts, even when a turn commits meanwhile, and are recorded together in
// one transaction once it is released.
func TestHandUnderHoldIsOneTransaction(t *testing.T) {
	noLeaks(t)
	r, store, fs, events := heldClient(t)
	ctx := context.Background()
	release := r.c.Hold()
	first := r.c.Hand(ctx, signedCommand(t, "act-0", "grp-a"))
	// A turn commits the event; a Command taken by it would be in the
	// outbox now.
	fs.appendLive("grp-a", events[3])
	waitFor(t, r.sig, "the live event applied", func() bool { return store.Cursor("grp-a") == 4 })
	if ids, b := outboxIDs(t, store.Store), store.batches(); len(ids) != 0 || len(b) != 0 {
		t.Fatalf("under the Hold: outbox %v, put transactions %v; want none", ids, b)
	}
	rest := []*Pending{r.c.Hand(ctx, signedCommand(t, "act-1", "grp-a")), r.c.Hand(ctx, signedCommand(t, "act-2", "grp-a"))}
	release()
	release() // a second call is a no-op, not a second release
	for i, p := range append([]*Pending{first}, rest...) {
		if rc, err := p.Wait(); err != nil || rc.ActionID != []string{"act-0", "act-1", "act-2"}[i] {
			t.Fatalf("Wait %d = %+v, %v", i, rc, err)
		}
	}
	if b := store.batches(); !slices.Equal(b, []int{3}) {
		t.Fatalf("put transactions %v, want the three Commands in one", b)
	}
	if _, cmds, _, _ := fs.snapshot(); len(cmds) != 3 {
		t.Fatalf("server got %d commands, want 3", len(cmds))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A sender that gives up before its handed Command was taken withdraws
// it: never recorded or sent. One handed when Run returns hears
// ErrNotRunning.
func TestHandWithdrawnAndNotRunning(t *testing.T) {
	noLeaks(t)
	r, store, fs, _ := heldClient(t)
	release := r.c.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	gone := r.c.Hand(ctx, signedCommand(t, "act-gone", "grp-a"))
	cancel()
	if _, err := gone.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v", err)
	}
	release()
	kept := signedCommand(t, "act-kept", "grp-a")
	if _, err := r.c.Send(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	if _, cmds, _, _ := fs.snapshot(); len(cmds) != 1 || !bytes.Equal(cmds[0], kept) {
		t.Fatalf("server got %d commands, want only the one not withdrawn", len(cmds))
	}
	if b := store.batches(); !slices.Equal(b, []int{1}) {
		t.Fatalf("put transactions %v, want only the one not withdrawn", b)
	}

	r.c.Hold() // never released: Run's end answers what it holds
	late := r.c.Hand(context.Background(), signedCommand(t, "act-late", "grp-a"))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Wait(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Wait after Run returned = %v, want ErrNotRunning", err)
	}
	if ids := outboxIDs(t, store.Store); len(ids) != 0 {
		t.Fatalf("outbox %v after Run returned, want empty", ids)
	}
}
