package queue

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// Any interleaving, duplication and reordering of a valid event stream,
// with restarts and tiny reorder buffers, followed by the replay a worker
// asks for (after each durable cursor), ends with the same cursors, inbox
// and queue as in-order delivery.
func TestPropertyAnyDeliveryConverges(t *testing.T) {
	groups := []string{"grp-a", "grp-b"}
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		r := rand.New(rand.NewPCG(seed, seed>>1))
		streams := []*stream{
			randomStream("grp-a", rapid.IntRange(1, 5).Draw(rt, "itemsA"), r),
			randomStream("grp-b", rapid.IntRange(0, 3).Draw(rt, "itemsB"), r),
		}
		var deliveries []Incoming
		for _, st := range streams {
			for _, in := range st.evs {
				for range rapid.IntRange(1, 3).Draw(rt, "copies") {
					deliveries = append(deliveries, in)
				}
			}
		}
		deliveries = rapid.Permutation(deliveries).Draw(rt, "order")
		opts := Options{NoSync: true, NoSocket: true, MaxBufferedEvents: rapid.IntRange(1, 8).Draw(rt, "maxBuffered")}

		dir := t.TempDir()
		s, err := Open(dir, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		for len(deliveries) > 0 {
			n := min(len(deliveries), rapid.IntRange(1, 6).Draw(rt, "batch"))
			mustApply(rt, s, deliveries[:n]...)
			deliveries = deliveries[n:]
			if rapid.IntRange(0, 9).Draw(rt, "restart") == 0 {
				s.Close()
				if s, err = Open(dir, opts); err != nil {
					rt.Fatal(err)
				}
			}
		}
		// The worker replays each Group after its durable cursor, in
		// order, until nothing is missing (what Result.Gaps asks for).
		for _, st := range streams {
			if c := s.Cursor(st.group); c < uint64(len(st.evs)) {
				mustApply(rt, s, st.evs[c:]...)
			}
		}

		ref, err := Open(t.TempDir(), opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer ref.Close()
		for _, st := range streams {
			for _, in := range st.evs {
				mustApply(rt, ref, in)
			}
		}
		for i, st := range streams {
			if len(st.evs) == 0 {
				continue
			}
			if got, want := s.Cursor(groups[i]), uint64(len(st.evs)); got != want {
				rt.Fatalf("%s cursor %d, want %d", groups[i], got, want)
			}
			got := dumpProjection(rt, s.db, groups[i]) + dumpInbox(rt, s.db, groups[i])
			want := dumpProjection(rt, ref.db, groups[i]) + dumpInbox(rt, ref.db, groups[i])
			if got != want {
				rt.Fatalf("%s differs from in-order delivery:\n%s\nwant\n%s", groups[i], got, want)
			}
			if !reflect.DeepEqual(s.Items(groups[i]), ref.Items(groups[i])) {
				rt.Fatalf("%s in-memory view differs", groups[i])
			}
		}
	})
}
