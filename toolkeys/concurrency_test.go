package toolkeys

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent Do calls of one key: exactly one calls, the others wait and
// replay its result.
func TestConcurrentSameKeyCallsOnce(t *testing.T) {
	const n = 8
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	var calls atomic.Int32
	release := make(chan struct{})
	call := func(context.Context, string, uint64) ([]byte, error) {
		calls.Add(1)
		<-release
		return []byte("the one result"), nil
	}
	results := make([]Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = l.Do(context.Background(), opA, call) })
	}
	waitForWaiters(t, l, keyKAT[0].want, n) // all inside Do before the call returns
	close(release)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil || string(results[i].Value) != "the one result" || results[i].Attempt != 1 {
			t.Fatalf("Do %d: %+v %v", i, results[i], errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
	}
	if calls.Load() != 1 || fresh != 1 {
		t.Fatalf("%d calls, %d fresh results", calls.Load(), fresh)
	}
}

// Several slots running many operations at once, each retried a few times
// after transient failures: one effect per operation, one key per
// operation, every record completed with the service's first response.
func TestConcurrentSlots(t *testing.T) {
	const slots, opsPerSlot = 4, 6
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	svc := newService()
	var wg sync.WaitGroup
	var ops []Op
	for s := range slots {
		for i := range opsPerSlot {
			// Two slots share each WorkItem's operations, so keys collide on purpose.
			ops = append(ops, Op{"mis-a", fmt.Sprintf("wi-%d", s/2), 1, fmt.Sprintf("op-%d", i)})
		}
	}
	for s := range slots {
		wg.Go(func() {
			for _, op := range ops[s*opsPerSlot : (s+1)*opsPerSlot] {
				for {
					_, err := l.Do(context.Background(), op, func(ctx context.Context, key string, attempt uint64) ([]byte, error) {
						r, _ := svc.apply(key, []byte(opBody(op)))
						if attempt < 2 { // the response is lost once
							return nil, fmt.Errorf("connection reset")
						}
						return r, nil
					})
					if err == nil {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	err := l.Records(func(r Record) error {
		if r.State != StateCompleted || r.Attempts != 2 || !bytes.Equal(r.Result, svc.firstResponse(r.Key)) {
			return fmt.Errorf("record %+v", r)
		}
		if n := svc.effectsOf(opBody(r.Op)); n != 1 {
			return fmt.Errorf("%d effects for %+v", n, r.Op)
		}
		if n := svc.requestsOf(r.Key); n != 2 {
			return fmt.Errorf("%d requests for %s", n, r.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
