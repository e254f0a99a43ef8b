package jslog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/internal/natstest"
)

// TestStreamLeaderLost stops the server leading the stream while deciders
// append, as an authority would: an append whose outcome is unknown
// (its answer lost with the server) is settled by its receipt, then
// retried. Every acknowledged commit is stored once, every Group has its
// events without a gap or a double.
func TestStreamLeaderLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and stops one")
	}
	c := natstest.StartCluster(t, 3)
	s, err := Open(context.Background(), Config{URLs: c.URLs, Replicas: 3, Timeout: 2 * time.Second,
		Options: []nats.Option{nats.ReconnectWait(50 * time.Millisecond), nats.MaxReconnects(-1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const lanes, commits = 4, 40
	var acked atomic.Int64
	halfway := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for l := range lanes {
		wg.Go(func() {
			g := fmt.Sprintf("g%d", l)
			for i := range commits {
				key := fmt.Sprintf("%s.%d", g, i)
				if err := appendSettled(ctx, s, g, uint64(2*i), key); err != nil {
					errs <- fmt.Errorf("%s commit %d: %w", g, i, err)
					return
				}
				if acked.Add(1) == lanes*commits/3 {
					once.Do(func() { close(halfway) })
				}
			}
		})
	}
	select {
	case <-halfway:
	case <-ctx.Done():
		t.Fatal("no third of the commits acknowledged")
	}
	if name := c.StopLeader("MWP"); name == "" {
		t.Fatal("no server leads the stream")
	} else {
		t.Logf("stopped %s, the stream's leader, after %d commits", name, acked.Load())
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for l := range lanes {
		g := fmt.Sprintf("g%d", l)
		var seqs []uint64
		if err := s.Read(ctx, g, 0, 0, func(seq uint64, raw []byte) bool {
			if string(raw) != fmt.Sprintf("%s/%d", g, seq) {
				t.Errorf("%s event %d holds %s", g, seq, raw)
			}
			seqs = append(seqs, seq)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 2*commits || seqs[len(seqs)-1] != 2*commits {
			t.Fatalf("%s has %d events up to %v, want %d", g, len(seqs), seqs[len(seqs)-1:], 2*commits)
		}
	}
}

// appendSettled appends two events after a sequence until the commit is
// known stored: by its answer, or by its receipt when the answer was lost.
func appendSettled(ctx context.Context, s *Store, g string, after uint64, key string) error {
	for {
		err := s.Append(ctx, logstore.Commit{GroupID: g, After: after,
			Events:   [][]byte{fmt.Appendf(nil, "%s/%d", g, after+1), fmt.Appendf(nil, "%s/%d", g, after+2)},
			Receipts: []logstore.Receipt{{Key: key, Value: []byte("r")}}})
		if err == nil || errors.Is(err, logstore.ErrReceiptExists) {
			return nil
		}
		if _, rerr := s.Receipt(ctx, key); rerr == nil {
			return nil // stored, its answer lost
		}
		if ctx.Err() != nil {
			return err
		}
		// Not stored: a server lost, or the leader moving. Again.
	}
}
