package queue

import (
	"runtime"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Semantics are encoding/json's rules (case-insensitive member names,
// duplicates allowed, the last one winning, invalid UTF-8 replaced, ...)
// for the decoder of json/v2, the one Go's encoding/json runs on under
// GOEXPERIMENT=jsonv2.
var v1Semantics = jsonv1.DefaultOptionsV1()

// unmarshal is json.Unmarshal, decoded by json/v2 with encoding/json's
// semantics: it gives the same values and fails on the same inputs, and
// takes about half the time for the stored events and entries the view
// replays and loads (replay is the start-up path, and its decoding was most
// of a rebuild: docs/performance.md). Only the error text differs.
func unmarshal(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, v1Semantics)
}

// decodeAhead decodes the values next yields on every core and hands the
// results to use in the order next yielded them, on one goroutine (not the
// caller's), returning once all are used. Only the caller calls next, so
// a bbolt cursor stays on its goroutine; the decoders read the values,
// which are the file's mapped bytes: they stay put for the transaction,
// and nothing may write to it before decodeAhead returns. Values go to
// the decoders in batches, so a channel send, a result channel and a
// wake-up are paid per batch, not per value.
func decodeAhead[T any](next func() (k, v []byte, ok bool), decode func(k, v []byte) T, use func(T)) {
	const (
		batch  = 32 // values per job
		window = 16 // jobs decoded ahead of use
	)
	type job struct {
		kv  [][2][]byte
		out chan<- []T
	}
	jobs := make(chan job, window)
	order := make(chan chan []T, window)
	var decoders sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		decoders.Go(func() {
			for j := range jobs {
				res := make([]T, len(j.kv))
				for i, kv := range j.kv {
					res[i] = decode(kv[0], kv[1])
				}
				j.out <- res
			}
		})
	}
	used := make(chan struct{})
	go func() {
		defer close(used)
		for res := range order {
			for _, r := range <-res {
				use(r)
			}
		}
	}()
	for more := true; more; {
		kv := make([][2][]byte, 0, batch)
		for len(kv) < batch {
			k, v, ok := next()
			if !ok {
				more = false
				break
			}
			kv = append(kv, [2][]byte{k, v})
		}
		if len(kv) == 0 {
			break
		}
		out := make(chan []T, 1)
		order <- out
		jobs <- job{kv, out}
	}
	close(jobs)
	close(order)
	decoders.Wait()
	<-used
}
