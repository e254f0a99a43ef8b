package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// lostStart stands in front of a worker's work.start commands. The first
// reaches the authority (in process) while nothing comes back down the
// connection, and its answer is lost: the client says its freshness window
// passed (client.ErrStale), as it does for a command it could not send
// again in time. The worker builds the start anew; that one is answered
// in process too, with whatever the authority says, still before the
// worker hears of the first start's events.
type lostStart struct {
	k       *wkit
	mu      sync.Mutex
	n       int   // starts sent
	rebuilt bool  // the rebuilt start has been answered
	refusal error // that answer
}

func (f *lostStart) wrap(next sendFunc) sendFunc {
	return func(ctx context.Context, raw []byte) func() (*protocol.Receipt, error) {
		var c struct {
			Type protocol.CommandType `json:"type"`
		}
		_ = json.Unmarshal(raw, &c)
		if c.Type != protocol.CmdWorkStart {
			return next(ctx, raw)
		}
		f.mu.Lock()
		f.n++
		n := f.n
		f.mu.Unlock()
		if n > 2 {
			return next(ctx, raw)
		}
		return func() (*protocol.Receipt, error) {
			if n == 1 {
				f.k.px.freeze()
				if _, err := f.k.auth.Service.Submit(ctx, "w1", raw); err != nil {
					f.k.t.Errorf("the first start was not applied: %v", err)
				}
				return nil, client.ErrStale
			}
			r, err := f.k.auth.Service.Submit(ctx, "w1", raw)
			f.mu.Lock()
			f.rebuilt, f.refusal = true, err
			f.mu.Unlock()
			return r, err
		}
	}
}

// answered reports the starts sent, whether the rebuilt one was answered
// and its answer.
func (f *lostStart) answered() (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.rebuilt, f.refusal
}

// A work.start the authority applied but whose answer never came, and a
// rebuilt start refused because the item is active already: the lease the
// first start was granted names this worker and its session, so the worker
// adopts it and runs under it, rather than holding the item until the lease
// lapses and the coordinator has to offer it again.
func TestWorkerAdoptsLeaseOfLostStart(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	f := &lostStart{k: k}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("the rebuilt start answered", func() bool { _, done, _ := f.answered(); return done }, tw)
	if _, _, err := f.answered(); err == nil {
		t.Fatalf("the rebuilt start was accepted: the item was not active under the first start's lease:\n%s\n%s", strings.Join(k.trace(), "\n"), k.logs)
	}
	lease := k.item("wi-1").Lease
	if k.state("wi-1") != protocol.WorkActive || lease == nil {
		t.Fatalf("the first start did not leave wi-1 active: %s %+v", k.state("wi-1"), lease)
	}

	k.px.thaw() // the first start's events reach the worker
	k.waitFor("running under the first start's lease", func(s WorkerStatus) bool {
		return len(s.Running) == 1 && s.Running[0].LeaseID == lease.LeaseID
	}, tw)
	if n, _, _ := f.answered(); n != 2 {
		t.Fatalf("%d starts sent, want 2: the lease was adopted without another", n)
	}
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	if n := k.count(protocol.EvtWorkStarted, "wi-1"); n != 1 {
		t.Fatalf("%d work.started, want 1:\n%s", n, strings.Join(k.trace(), "\n"))
	}
}
