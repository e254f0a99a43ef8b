package client

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The pool hands frames on in arrival order whatever order its decoders
// finish in, then the read error, and stops cleanly.
func TestDecodePoolKeepsOrder(t *testing.T) {
	const n = 500
	out := make(chan readItem)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	decode := func(b []byte) (inbound, error) {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		return inbound{typ: protocol.FrameType(b)}, nil
	}
	p := newDecodePool(4, 8, decode, out, stop, &wg)
	go func() {
		for i := range n {
			p.frame([]byte(strconv.Itoa(i)))
		}
		p.fail(errors.New("read: closed"))
		p.close()
	}()
	for i := range n {
		it := <-out
		if it.err != nil || string(it.f.typ) != strconv.Itoa(i) {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	if it := <-out; it.err == nil {
		t.Fatalf("want the read error last, got %+v", it)
	}
	close(stop)
	wg.Wait()
}

// Once stop is closed nobody reads the results: the pool drains what is
// queued so the reader is never stuck, and every goroutine ends.
func TestDecodePoolStopDrains(t *testing.T) {
	out := make(chan readItem) // never read
	stop := make(chan struct{})
	var wg sync.WaitGroup
	p := newDecodePool(2, 2, func(b []byte) (inbound, error) { return inbound{}, nil }, out, stop, &wg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			p.frame([]byte("x"))
		}
		p.close()
	}()
	// Give the reader time to fill the window and block (the assertion below
	// holds either way; this makes it exercise the blocked case).
	time.Sleep(10 * time.Millisecond)
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader stayed blocked after stop")
	}
	wg.Wait()
}
