package scheduler_test

import (
	"container/heap"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

const (
	benchQueued = 10_000
	benchGroups = 100
	benchSlots  = 8
)

func benchScheduler(b *testing.B) (*scheduler.Scheduler, []string) {
	b.Helper()
	s, err := scheduler.New(scheduler.Config{Slots: benchSlots})
	if err != nil {
		b.Fatal(err)
	}
	groups := make([]string, benchGroups)
	for g := range groups {
		groups[g] = fmt.Sprintf("grp-%03d", g)
		if err := s.SetGroup(groups[g], scheduler.GroupConfig{Weight: int64(1 + g%4)}); err != nil {
			b.Fatal(err)
		}
	}
	return s, groups
}

func benchItem(i int, groups []string) scheduler.Item {
	it := scheduler.Item{
		ID: fmt.Sprintf("wi-%07d", i), Group: groups[i%len(groups)],
		Urgency: scheduler.Urgency(i % 4), Estimate: time.Duration(50+i%100) * time.Millisecond,
	}
	if i%5 == 0 {
		it.Deadline = t0.Add(time.Duration(i) * time.Second)
	}
	return it
}

type intHeap []int64

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// BenchmarkPickComplete: one cycle is Next (pick into the slot that just
// freed) + Finish + Enqueue of a fresh item, with 10,000 items queued across
// 100 Groups. In the same run it times container/heap push+pop at the same
// size and reports the ratio of cycles/s to heap ops/s ("vs-heap"; goal
// ≥ 0.30) and the heap bytes per queued item.
func BenchmarkPickComplete(b *testing.B) {
	s, groups := benchScheduler(b)
	// benchQueued+benchSlots items circulate: the item that finishes is
	// enqueued again, so the queue stays at 10,000 with no setup in the loop.
	items := make([]scheduler.Item, benchQueued+benchSlots)
	for i := range items {
		items[i] = benchItem(i, groups)
		if err := s.Enqueue(items[i], t0); err != nil {
			b.Fatal(err)
		}
	}
	running := make([]string, benchSlots)
	for i := range running {
		d, ok := s.Next(t0)
		if !ok {
			b.Fatal("no start")
		}
		running[i] = d.Item
	}
	h := make(intHeap, 0, benchQueued+benchSlots+1)
	for i := range benchQueued + benchSlots {
		h = append(h, int64(i*7919%benchQueued))
	}
	heap.Init(&h)

	// The two are timed in interleaved chunks so that load from elsewhere
	// on the machine falls on both alike.
	const chunk = 1024
	var schedTime, heapTime time.Duration
	now := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		start := time.Now()
		for i := done; i < done+n; i++ {
			now++
			slot := i % benchSlots
			fin := running[slot]
			if err := s.Finish(fin, at(now)); err != nil {
				b.Fatal(err)
			}
			if err := s.Enqueue(items[itemIndex(fin)], at(now)); err != nil {
				b.Fatal(err)
			}
			d, ok := s.Next(at(now))
			if !ok {
				b.Fatal("no start")
			}
			running[slot] = d.Item
		}
		schedTime += time.Since(start)
		b.StopTimer()
		start = time.Now()
		for i := done; i < done+n; i++ {
			heap.Push(&h, int64(i))
			heap.Pop(&h)
		}
		heapTime += time.Since(start)
		b.StartTimer()
		done += n
	}
	schedNs := float64(schedTime.Nanoseconds()) / float64(b.N)
	heapNs := float64(heapTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(heapNs/schedNs, "vs-heap")
	b.ReportMetric(heapNs, "heap-ns/op")
}

// BenchmarkQueuedItemMemory reports the heap bytes each of 10,000 queued
// items costs. It measures once whatever b.N is: only the metric matters.
func BenchmarkQueuedItemMemory(b *testing.B) {
	s, groups := benchScheduler(b)
	items := make([]scheduler.Item, benchQueued)
	for i := range items {
		items[i] = benchItem(i, groups)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range items {
		if err := s.Enqueue(items[i], t0); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchQueued, "B/queued-item")
	runtime.KeepAlive(s)
	runtime.KeepAlive(items)
	for range b.N {
	}
}

// itemIndex reads i back from "wi-%07d" (cheaper than a map in the loop).
func itemIndex(id string) int {
	n := 0
	for _, c := range id[3:] {
		n = n*10 + int(c-'0')
	}
	return n
}
