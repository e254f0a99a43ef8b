package client

import "sync"

// decodePool decodes and verifies inbound frames on several goroutines and
// hands them on in arrival order. Signature verification is most of an
// event's cost (docs/performance.md), so a worker catching up on a long replay uses
// every core for it while the session goroutine commits.
//
// Each frame gets a one-result channel, queued in arrival order before
// its job is handed to a decoder; one forwarder waits on them in that
// order. The order of frames, and so of events within a Group, is never
// changed.
type decodePool struct {
	jobs    chan decodeJob
	order   chan chan readItem
	decode  func([]byte) (inbound, error)
	workers sync.WaitGroup
}

type decodeJob struct {
	data []byte
	out  chan readItem
}

// newDecodePool starts n decoders and the forwarder, which sends results
// to out until stop is closed. window bounds the frames in flight.
func newDecodePool(n, window int, decode func([]byte) (inbound, error), out chan<- readItem, stop <-chan struct{}, wg *sync.WaitGroup) *decodePool {
	p := &decodePool{jobs: make(chan decodeJob, window), order: make(chan chan readItem, window), decode: decode}
	for range n {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for j := range p.jobs {
				var it readItem
				it.f, it.bad = p.decode(j.data)
				j.out <- it
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer p.workers.Wait()
		for res := range p.order {
			it := <-res
			select {
			case out <- it:
			case <-stop:
				// Drain: the decoders must not block on results nobody reads.
				for res := range p.order {
					<-res
				}
				return
			}
		}
	}()
	return p
}

// frame queues one text message.
func (p *decodePool) frame(data []byte) {
	res := make(chan readItem, 1)
	p.order <- res
	p.jobs <- decodeJob{data: data, out: res}
}

// fail queues a read error after every frame before it.
func (p *decodePool) fail(err error) {
	res := make(chan readItem, 1)
	res <- readItem{err: err}
	p.order <- res
}

// close ends the decoders and, once everything queued is forwarded (or
// stop was closed), the forwarder.
func (p *decodePool) close() {
	close(p.jobs)
	close(p.order)
}

// decodeWorkers is how many goroutines decode inbound frames.
func decodeWorkers(n int) int {
	if n <= 0 {
		return 1
	}
	return min(n, 4)
}
