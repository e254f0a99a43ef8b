package authoritylite

import (
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// writer is the authority's group commit: one goroutine takes every write
// queued so far, from any Group, and commits them in one bbolt
// transaction, so one fsync covers many commands. Writes commit in the
// order they were queued, and a Group queues under its lock, so sequences
// reach the disk in order and a crash can only lose a suffix. A write
// queued with reserve holds its place until its events are signed, after
// the lock.
//
// A failed commit leaves memory ahead of the disk; the writer then refuses
// everything and closes brokenCh: the process must exit and a supervisor
// restart it, to reload from the log, as a database does after a failed
// fsync (Service.Failed).
type writer struct {
	db        *logDB
	head      *head
	m         *metrics
	reqs      chan *writeReq
	stop      chan struct{}
	closeOnce sync.Once
	done      sync.WaitGroup

	mu       sync.Mutex
	broken   error
	brokenCh chan struct{}
	// inject, in tests, fails a commit as a full disk would.
	inject func() error

	// Owned by run: the requests seen around the last commit (answered
	// plus queued while it ran) and a moving average of how long commits
	// take (one stalled fsync must not stretch the next waits); gather
	// waits for that many, for at most half that long.
	seen int
	took time.Duration
}

type writeReq struct {
	fn   func(logstore.Tx) error
	done chan error
	// ready, when not nil, is closed once fn may run: the request keeps its
	// place in the commit order while its events are signed outside the
	// Group's lock.
	ready chan struct{}
}

// maxBatch bounds one transaction; docs/performance.md: bigger batches stop paying
// once the fsync is amortized.
const maxBatch = 512

func newWriter(db *logDB, h *head, m *metrics) *writer {
	w := &writer{db: db, head: h, m: m, reqs: make(chan *writeReq, maxBatch), stop: make(chan struct{}), brokenCh: make(chan struct{})}
	w.done.Add(1)
	go w.run()
	return w
}

// submit queues fn; the returned channel yields its commit's result.
func (w *writer) submit(fn func(logstore.Tx) error) <-chan error {
	return w.queue(&writeReq{fn: fn, done: make(chan error, 1)})
}

// reserve queues fn in its place but holds its commit until release is
// called: the caller queues under its Group's lock, so sequences stay in
// order, and fills in what fn writes after the lock is released. release
// must be called exactly once, whatever happens.
func (w *writer) reserve(fn func(logstore.Tx) error) (done <-chan error, release func()) {
	r := &writeReq{fn: fn, done: make(chan error, 1), ready: make(chan struct{})}
	return w.queue(r), func() { close(r.ready) }
}

func (w *writer) queue(r *writeReq) <-chan error {
	if err := w.err(); err != nil {
		r.done <- err
		return r.done
	}
	select {
	case w.reqs <- r:
	case <-w.stop:
		r.done <- errClosed
	}
	return r.done
}

// injected is the test's failure for this commit, if any.
func (w *writer) injected() error {
	w.mu.Lock()
	f := w.inject
	w.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

func (w *writer) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broken
}

func (w *writer) run() {
	defer w.done.Done()
	for {
		var first *writeReq
		select {
		case first = <-w.reqs:
		case <-w.stop:
			w.drainClosed()
			return
		}
		batch := w.gather(first)
		for _, r := range batch {
			if r.ready != nil {
				<-r.ready
			}
		}
		err := w.err()
		if err == nil {
			start, wrote := time.Now(), w.writeTime()
			var txid uint64
			err = w.db.Update(func(tx logstore.Tx) error {
				if err := w.injected(); err != nil {
					return err
				}
				txid = uint64(tx.ID())
				cut, _ := tx.(logstore.Cutter)
				for _, r := range batch {
					if err := r.fn(tx); err != nil {
						return err
					}
					if cut != nil {
						cut.Cut() // a store written in parts keeps each command whole
					}
				}
				return nil
			})
			took := time.Since(start)
			w.took += (took - w.took) / 4
			w.seen = len(batch) + len(w.reqs)
			w.m.commit(len(batch), took, w.writeTime()-wrote, err)
			if err == nil {
				w.head.record(txid)
			} else {
				w.fail(err)
			}
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

// gather takes first and what else is queued. When fewer are queued than
// were in flight around the last commit, it waits up to half the
// average commit time for the rest: the clients a commit has just answered send
// again within a fraction of a commit, and without the wait they would
// miss this one and pay a commit of their own, so batches alternate
// between halves of the clients. Waiting is bounded by what was observed
// (the idea of PostgreSQL's commit_delay, without a setting): one client
// alone never waits.
func (w *writer) gather(first *writeReq) []*writeReq {
	batch := []*writeReq{first}
	for len(batch) < maxBatch {
		select {
		case r := <-w.reqs:
			batch = append(batch, r)
			continue
		default:
		}
		break
	}
	want := min(w.seen, maxBatch)
	if len(batch) >= want || w.took <= 0 {
		return batch
	}
	t := time.NewTimer(w.took / 2)
	defer t.Stop()
	for len(batch) < want {
		select {
		case r := <-w.reqs:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-w.stop:
			return batch
		}
	}
	return batch
}

// writeTime is bbolt's running total of time spent writing and syncing.
func (w *writer) writeTime() time.Duration {
	return w.db.writeTime()
}

func (w *writer) drainClosed() {
	for {
		select {
		case r := <-w.reqs:
			r.done <- errClosed
		default:
			return
		}
	}
}

func (w *writer) close() {
	w.closeOnce.Do(func() { close(w.stop) })
	w.done.Wait()
}

type closedError struct{}

func (closedError) Error() string { return "authority: closed" }

var errClosed error = closedError{}

// fail marks the writer broken: memory and disk may disagree from here on.
func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken == nil {
		w.broken = err
		close(w.brokenCh)
	}
}

// recorder collects one Group's puts under the Group lock, so the write
// carries the state as decided, not as it is when the writer runs.
type recorder struct {
	events, items, proposals, meta, leases kvList
	// tail, when events were put, takes them once their commit is durable.
	tail  *eventTail
	added []wss.StoredEvent
}

// kvList is puts and deletes in order; a nil value is a delete.
type kvList struct{ keys, vals [][]byte }

func (l *kvList) Put(k, v []byte) error {
	if v == nil {
		v = []byte{}
	}
	l.keys = append(l.keys, append([]byte(nil), k...))
	l.vals = append(l.vals, v)
	return nil
}

func (l *kvList) Delete(k []byte) {
	l.keys = append(l.keys, append([]byte(nil), k...))
	l.vals = append(l.vals, nil)
}

// apply writes the recorded changes into gb, which openGroupBuckets
// opened with create set when leases were recorded.
func (r *recorder) apply(gb *groupBuckets) error {
	for _, p := range []struct {
		l *kvList
		b logstore.Bucket
	}{{&r.events, gb.events}, {&r.items, gb.items}, {&r.proposals, gb.proposals}, {&r.meta, gb.meta}, {&r.leases, gb.leases}} {
		for i, k := range p.l.keys {
			var err error
			if v := p.l.vals[i]; v == nil {
				err = p.b.Delete(k)
			} else {
				err = p.b.Put(k, v)
			}
			if err != nil {
				return err
			}
		}
	}
	if r.tail != nil && len(r.added) > 0 {
		t, added := r.tail, r.added
		gb.tx.OnCommit(func() { t.add(added) })
	}
	return nil
}

// inflight is a command queued for commit: a retry arriving before the
// write is durable waits for it instead of deciding twice.
type inflight struct {
	digest  string
	receipt *protocol.Receipt
	done    chan struct{}
	err     error
}

func (b *receiptBook) begin(key []byte, digest string, r *protocol.Receipt) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight[string(key)] = &inflight{digest: digest, receipt: r, done: make(chan struct{})}
}

// end ends key's wait; a durable receipt goes to the recent ones
// before it leaves the in-flight map, so a lookup finds it in one of them.
func (b *receiptBook) end(key []byte, err error) {
	b.mu.Lock()
	f := b.inflight[string(key)]
	if f != nil && err == nil {
		b.recent.add(string(key), receiptRecord{Digest: f.digest, Receipt: *f.receipt})
	}
	delete(b.inflight, string(key))
	b.mu.Unlock()
	if f != nil {
		f.err = err
		close(f.done)
	}
}

func (b *receiptBook) inflightFor(key []byte) *inflight {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight[string(key)]
}

// lockSoon tries to take mu for a short while instead of blocking, for the
// one place locks are taken against the usual order.
func lockSoon(mu *sync.Mutex) bool {
	for i := 0; i < 200; i++ {
		if mu.TryLock() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
