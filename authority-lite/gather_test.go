package authoritylite

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"
)

func testWriter(t *testing.T) *writer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(&logDB{tree: boltlog.Tree{DB: bdb}, bolt: bdb, path: path, log: slog.New(slog.DiscardHandler)}, nil, newMetrics())
	t.Cleanup(func() {
		w.close()
		bdb.Close()
	})
	return w
}

// txOf submits a write that records the id of the transaction it ran in.
func txOf(w *writer, ids []uint64, i int, mu *sync.Mutex) <-chan error {
	return w.submit(func(tx logstore.Tx) error {
		mu.Lock()
		ids[i] = uint64(tx.ID())
		mu.Unlock()
		return nil
	})
}

// After a commit that served three requests, the writer waits for three
// before committing again: the two that arrive after it took the first
// share its transaction instead of paying one of their own.
func TestWriterGathersAsManyAsItServed(t *testing.T) {
	w := testWriter(t)
	// As if the last commit answered three and took long: the wait ends
	// when the third arrives, not by its deadline.
	w.seen, w.took = 3, time.Hour
	var mu sync.Mutex
	ids := make([]uint64, 3)
	first := txOf(w, ids, 0, &mu)
	for len(w.reqs) > 0 { // the writer has taken the first
		time.Sleep(time.Millisecond)
	}
	rest := []<-chan error{txOf(w, ids, 1, &mu), txOf(w, ids, 2, &mu)}
	for _, done := range append(rest, first) {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("transactions %v, want the three in one", ids)
	}
}

// With one client in flight the writer never waits: the request commits
// at once, whatever the last commit took.
func TestWriterAloneDoesNotWait(t *testing.T) {
	w := testWriter(t)
	w.seen, w.took = 1, time.Hour
	var mu sync.Mutex
	ids := make([]uint64, 1)
	select {
	case err := <-txOf(w, ids, 0, &mu):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a lone request waited for others")
	}
}
