package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// lostAcrossCut holds the first command of type typ until lose is closed,
// then ends it without an answer (the connection went with it); the
// authority never sees it. Every command of that type is recorded with
// whether the proxy was cut when it was handed to the client.
type lostAcrossCut struct {
	typ  protocol.CommandType
	px   *proxy
	lose chan struct{}

	mu   sync.Mutex
	sent []bool // per command of type typ: handed while cut
}

func (f *lostAcrossCut) wrap(next sendFunc) sendFunc {
	return func(ctx context.Context, raw []byte) func() (*protocol.Receipt, error) {
		var c struct {
			Type protocol.CommandType `json:"type"`
		}
		_ = json.Unmarshal(raw, &c)
		if c.Type != f.typ {
			return next(ctx, raw)
		}
		f.px.mu.Lock()
		down := f.px.down
		f.px.mu.Unlock()
		f.mu.Lock()
		f.sent = append(f.sent, down)
		first := len(f.sent) == 1
		f.mu.Unlock()
		if !first {
			return next(ctx, raw)
		}
		return func() (*protocol.Receipt, error) {
			select {
			case <-f.lose:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, errors.New("injected: the connection closed before the answer")
		}
	}
}

func (f *lostAcrossCut) attempts() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.sent...)
}

// A live command whose answer was lost across a cut is retried, but only
// once the worker is back online and reconciled (spec 11.5: offline, only
// bufferable progress is produced, signed with the binding; a live command
// goes to the authority only with a valid session). The retry's back-off
// passes while the worker is offline and nothing is handed to the client
// then; after the reconnect the submission goes again (rebuilt when its
// freshness window has passed) and is applied.
func TestWorkerLiveCommandWaitsForReconnect(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	f := &lostAcrossCut{typ: protocol.CmdWorkSubmit, px: k.px, lose: make(chan struct{})}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 2), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.waitFor("both running", runningAll("wi-1", "wi-2"), tw)
	h.release("wi-1")
	k.until("submission handed", func() bool { return len(f.attempts()) == 1 }, tw)

	k.px.cut()
	k.waitFor("offline", func(s WorkerStatus) bool { return s.Offline == "offline" }, tw)
	close(f.lose) // the submission's answer is lost with the connection
	// Each renewal of wi-2 the worker buffers offline marks a turn of its
	// loop that also retried what was due: the first past half wi-2's
	// lease, the next ten ticks later, both well past the submission's
	// back-off (two ticks).
	k.fc.Advance(61 * time.Second)
	k.waitFor("wi-2's renewal buffered", func(s WorkerStatus) bool { return s.Buffered == 1 }, tw)
	k.fc.Advance(11 * time.Second)
	k.waitFor("wi-2's second renewal buffered", func(s WorkerStatus) bool { return s.Buffered == 2 }, tw)
	if got := f.attempts(); len(got) != 1 {
		t.Fatalf("the submission was handed %d times, %d while offline; want it held until the worker is online", len(got), countTrue(got))
	}

	k.reconnect(tw)
	k.until("submitted after the reconnect", func() bool {
		if k.state("wi-1") == protocol.WorkSubmitted {
			return true
		}
		k.fc.Advance(time.Second) // past the back-off, should it have grown
		return false
	}, tw)
	// After the reconnect the same bytes go, or (past the freshness
	// window) the submission built again: never anything while cut.
	if got := f.attempts(); len(got) < 2 || countTrue(got) != 0 {
		t.Fatalf("submission handed %v (true: while cut), want once before the cut and again only after it", got)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// A lost lease is never renewed (spec 11.3: work stops when its lease
// ends; the worker holds nothing to renew): after the authority refuses a
// renewal as fenced, the worker sends no further renewal for that lease,
// even while the run has not yet reached a safe point and its next
// renewal is long due.
func TestWorkerRenewsNoLostLease(t *testing.T) {
	k := newWKit(t)
	h := &stubbornHandler{release: make(chan struct{})} // wi-1 ignores the request to stop
	f := &sendFault{typ: protocol.CmdLeaseRenew, left: 1,
		err: protocol.Errorf(protocol.CodeWorkLeaseExpired, "injected: the lease is not the current one")}
	tw := k.startVia(k.workerConfig("w1", t.TempDir(), h, 1), f.wrap)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)

	k.fc.Advance(61 * time.Second)                                                   // past half the lease: the renewal goes and is refused
	k.until("the slot asked to stop", func() bool { return h.asked.Load() > 0 }, tw) // the loss reached the slot
	k.fc.Advance(30 * time.Second)                                                   // the next renewal would be due by now
	close(h.release)
	// The run's end is handled in a later turn of the worker's loop than
	// the refusal, so every turn that could renew has run by then.
	k.waitFor("the run ended", func(s WorkerStatus) bool { return len(s.Running) == 0 }, tw)
	if n := len(f.attempts()); n != 1 {
		t.Fatalf("%d renewals sent, want 1: a lease lost to a fenced refusal was renewed again", n)
	}
}
