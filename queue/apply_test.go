package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

var fast = Options{NoSync: true, NoSocket: true}

// reference applies evs in order, one event per batch, to a fresh store and
// returns each Group's projection dump and inbox.
func reference(t *testing.T, groups []string, evs []Incoming) map[string]string {
	t.Helper()
	s := openTest(t, t.TempDir(), fast)
	for _, in := range evs {
		res := mustApply(t, s, in)
		if len(res.Applied) != 1 {
			t.Fatalf("reference: event %s not applied: %+v", in.Event.EventID, res)
		}
	}
	out := make(map[string]string)
	for _, g := range groups {
		out[g] = dumpProjection(t, s.db, g) + dumpInbox(t, s.db, g)
	}
	return out
}

func stateOf(t *testing.T, s *Store, groups []string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, g := range groups {
		out[g] = dumpProjection(t, s.db, g) + dumpInbox(t, s.db, g)
	}
	return out
}

func TestApplyInOrderIsOneCommit(t *testing.T) {
	st := randomStream("g", 30, rand.New(rand.NewPCG(1, 2)))
	s := openTest(t, t.TempDir(), fast)
	res := mustApply(t, s, st.evs...)
	if len(res.Applied) != len(st.evs) || len(res.Duplicates)+len(res.Buffered)+len(res.Rejected)+len(res.Problems) != 0 {
		t.Fatalf("result = %+v", res)
	}
	if s.commits.Load() != 1 {
		t.Errorf("commits = %d, want 1 for one batch of %d events", s.commits.Load(), len(st.evs))
	}
	want := []protocol.Cursor{{GroupID: "g", Sequence: uint64(len(st.evs))}}
	if !reflect.DeepEqual(res.Cursors, want) || !reflect.DeepEqual(s.Cursors(), want) {
		t.Errorf("cursors = %v / %v, want %v", res.Cursors, s.Cursors(), want)
	}
	for i, in := range st.evs {
		got, err := s.Event("g", uint64(i+1))
		if err != nil || string(got) != string(in.Raw) {
			t.Fatalf("inbox %d = %s, %v; want the received bytes", i+1, got, err)
		}
	}
	// The in-memory view is the pure projection of the stream.
	view := viewOf(t, "g", st.evs)
	for _, e := range s.Items("g") {
		if !reflect.DeepEqual(&e, view.items[e.WorkItemID]) {
			t.Errorf("item %s = %+v, want %+v", e.WorkItemID, e, view.items[e.WorkItemID])
		}
	}
	if len(s.Items("g")) != len(view.items) || len(res.Changed) != len(view.items) {
		t.Errorf("%d items, %d changed, want %d", len(s.Items("g")), len(res.Changed), len(view.items))
	}
}

func TestApplyDuplicatesInterleaved(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			st := randomStream("g", 12, r)
			want := reference(t, []string{"g"}, st.evs)
			// Each event 2–5 times; copies shuffled within a sliding window
			// so duplicates interleave with later events.
			var deliveries []Incoming
			for _, in := range st.evs {
				for range 2 + r.IntN(4) {
					deliveries = append(deliveries, in)
				}
			}
			for i := range deliveries {
				j := min(len(deliveries)-1, i+r.IntN(6))
				deliveries[i], deliveries[j] = deliveries[j], deliveries[i]
			}
			s := openTest(t, t.TempDir(), fast)
			var applied, dups int
			for len(deliveries) > 0 {
				n := min(len(deliveries), 1+r.IntN(8))
				res := mustApply(t, s, deliveries[:n]...)
				deliveries = deliveries[n:]
				applied += len(res.Applied)
				dups += len(res.Duplicates)
				if len(res.Rejected)+len(res.Dropped) != 0 {
					t.Fatalf("rejected %v dropped %v", res.Rejected, res.Dropped)
				}
			}
			if applied != len(st.evs) {
				t.Errorf("applied %d events, want each of %d exactly once", applied, len(st.evs))
			}
			if got := stateOf(t, s, []string{"g"}); !reflect.DeepEqual(got, want) {
				t.Errorf("state after duplicated delivery differs from in-order delivery:\n%s\nwant\n%s", got["g"], want["g"])
			}
		})
	}
}

func TestApplyReorderedWithGaps(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	for i := 0; i < 5; i++ {
		st.message(fmt.Sprint(i))
	}
	ev := func(seq int) Incoming { return st.evs[seq-1] }
	type step struct {
		deliver      []int
		wantApplied  []uint64
		wantBuffered []uint64
		wantCursor   uint64
		wantGap      *Gap
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"gap then fill", []step{
			{[]int{2, 3}, nil, []uint64{2, 3}, 0, &Gap{"g", 0, 2}},
			{[]int{1}, []uint64{1, 2, 3}, nil, 3, nil},
		}},
		{"reverse order", []step{
			{[]int{6, 5, 4}, nil, []uint64{4, 5, 6}, 0, &Gap{"g", 0, 4}},
			{[]int{3, 2}, nil, []uint64{2, 3}, 0, &Gap{"g", 0, 2}},
			{[]int{1}, []uint64{1, 2, 3, 4, 5, 6}, nil, 6, nil},
		}},
		{"two gaps", []step{
			{[]int{1, 3, 5}, []uint64{1}, []uint64{3, 5}, 1, &Gap{"g", 1, 3}},
			{[]int{2}, []uint64{2, 3}, nil, 3, &Gap{"g", 3, 5}},
			{[]int{6, 4}, []uint64{4, 5, 6}, nil, 6, nil},
		}},
		{"gap filled inside one batch", []step{
			{[]int{3, 1, 2}, []uint64{1, 2, 3}, nil, 3, nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), fast)
			for i, stp := range tc.steps {
				var batch []Incoming
				for _, q := range stp.deliver {
					batch = append(batch, ev(q))
				}
				res := mustApply(t, s, batch...)
				if got := seqs(res.Applied); !slices.Equal(got, stp.wantApplied) && len(got)+len(stp.wantApplied) > 0 {
					t.Errorf("step %d applied %v, want %v", i, got, stp.wantApplied)
				}
				if got := seqs(res.Buffered); !slices.Equal(got, stp.wantBuffered) && len(got)+len(stp.wantBuffered) > 0 {
					t.Errorf("step %d buffered %v, want %v", i, got, stp.wantBuffered)
				}
				if c := s.Cursor("g"); c != stp.wantCursor {
					t.Errorf("step %d cursor %d, want %d", i, c, stp.wantCursor)
				}
				var gap *Gap
				if len(res.Gaps) == 1 {
					gap = &res.Gaps[0]
				}
				if !reflect.DeepEqual(gap, stp.wantGap) {
					t.Errorf("step %d gap %+v, want %+v", i, gap, stp.wantGap)
				}
				// The durable cursor never passes a gap.
				if got := dumpInbox(t, s.db, "g"); got != dumpInbox(t, reference1(t, st.evs[:stp.wantCursor]), "g") {
					t.Errorf("step %d inbox holds more than the contiguous run", i)
				}
			}
		})
	}
}

// reference1 is a store holding evs applied in order.
func reference1(t *testing.T, evs []Incoming) *bolt.DB {
	s := openTest(t, t.TempDir(), fast)
	if len(evs) > 0 {
		mustApply(t, s, evs...)
	}
	return s.db
}

func TestApplyBufferBounds(t *testing.T) {
	st := newStream("g")
	for i := 0; i < 8; i++ {
		st.message("m")
	}
	ev := func(seq int) Incoming { return st.evs[seq-1] }
	s := openTest(t, t.TempDir(), Options{NoSync: true, NoSocket: true, MaxBufferedEvents: 2, MaxBufferedBytes: 1 << 20})

	res := mustApply(t, s, ev(4), ev(5))
	if got := seqs(res.Buffered); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("buffered %v", got)
	}
	// 3 is nearer the cursor than 5: 5 is evicted for it.
	res = mustApply(t, s, ev(3))
	if got, drop := seqs(res.Buffered), seqs(res.Dropped); !slices.Equal(got, []uint64{3}) || !slices.Equal(drop, []uint64{5}) {
		t.Fatalf("buffered %v dropped %v, want [3] and [5]", got, drop)
	}
	// 6 is the farthest: refused.
	res = mustApply(t, s, ev(6))
	if drop := seqs(res.Dropped); !slices.Equal(drop, []uint64{6}) || len(res.Buffered) != 0 {
		t.Fatalf("dropped %v buffered %v, want [6] and none", drop, res.Buffered)
	}
	res = mustApply(t, s, ev(1), ev(2))
	if got := seqs(res.Applied); !slices.Equal(got, []uint64{1, 2, 3, 4}) || s.Cursor("g") != 4 {
		t.Fatalf("applied %v cursor %d", got, s.Cursor("g"))
	}
	// What was dropped comes again by replay after the cursor.
	mustApply(t, s, st.evs[4:]...)
	if s.Cursor("g") != 8 || len(s.Buffers()) != 0 {
		t.Fatalf("cursor %d buffers %v", s.Cursor("g"), s.Buffers())
	}

	// The byte bound works the same way.
	s2 := openTest(t, t.TempDir(), Options{NoSync: true, NoSocket: true, MaxBufferedEvents: 100, MaxBufferedBytes: len(ev(3).Raw) + len(ev(4).Raw)})
	res = mustApply(t, s2, ev(3), ev(4), ev(5))
	if got, drop := seqs(res.Buffered), seqs(res.Dropped); !slices.Equal(got, []uint64{3, 4}) || !slices.Equal(drop, []uint64{5}) {
		t.Fatalf("byte bound: buffered %v dropped %v", got, drop)
	}
	if b := s2.Buffers(); len(b) != 1 || b[0].Events != 2 || b[0].Bytes != len(ev(3).Raw)+len(ev(4).Raw) || b[0].FirstHeld != 3 {
		t.Fatalf("buffers %+v", b)
	}
}

func TestApplyRejectsWhatCannotBePlaced(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.message("a")
	st.message("b")
	mutate := func(base Incoming, f func(*protocol.Event)) Incoming {
		var ev protocol.Event
		if err := json.Unmarshal(base.Raw, &ev); err != nil {
			t.Fatal(err)
		}
		f(&ev)
		return mustIncoming(&ev)
	}
	tests := []struct {
		name  string
		prior []Incoming
		bad   Incoming
	}{
		{"no eventId", nil, mutate(st.evs[0], func(e *protocol.Event) { e.EventID = "" })},
		{"group event without sequence", nil, mutate(st.evs[0], func(e *protocol.Event) { e.Sequence = nil })},
		{"sequence zero", nil, mutate(st.evs[0], func(e *protocol.Event) { e.Sequence = protocol.Uint64(0) })},
		{"Organization-scoped type with a groupId", nil, mutate(st.evs[0], func(e *protocol.Event) { e.Type = protocol.EvtSessionOpened })},
		{"Group type without a groupId", nil, mutate(st.evs[0], func(e *protocol.Event) { e.GroupID, e.Sequence = "", nil })},
		{"undecodable bytes", nil, Incoming{Raw: []byte(`{"eventId": 7`)}},
		{"empty bytes", nil, Incoming{Event: st.evs[0].Event}},
		{"another event at a buffered sequence", []Incoming{st.evs[2]}, mutate(st.evs[2], func(e *protocol.Event) { e.EventID = "evt-other" })},
		{"an accepted eventId at a new sequence", []Incoming{st.evs[0]}, mutate(st.evs[0], func(e *protocol.Event) { e.Sequence = protocol.Uint64(2) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), fast)
			if len(tc.prior) > 0 {
				mustApply(t, s, tc.prior...)
			}
			var before string
			if s.Cursor("g") > 0 {
				before = dumpProjection(t, s.db, "g") + dumpInbox(t, s.db, "g")
			}
			bufBefore := s.Buffers()
			res, err := s.Apply([]Incoming{tc.bad})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rejected) != 1 || res.Rejected[0].Err.Code != protocol.CodeProtocolViolation || len(res.Applied) != 0 {
				t.Fatalf("result = %+v", res)
			}
			if s.Cursor("g") > 0 {
				if after := dumpProjection(t, s.db, "g") + dumpInbox(t, s.db, "g"); after != before {
					t.Errorf("a rejected event changed the store")
				}
			}
			if !reflect.DeepEqual(s.Buffers(), bufBefore) {
				t.Errorf("a rejected event changed the buffer: %+v", s.Buffers())
			}
		})
	}
}

func TestApplyProblemEventStillAdvances(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.add(protocol.EvtWorkStarted, protocol.AggregateWorkItem, "wi-404", self, obj{"workItemId": "wi-404", "leaseId": "l"})
	st.message("after")
	s := openTest(t, t.TempDir(), fast)
	res := mustApply(t, s, st.evs...)
	if len(res.Problems) != 1 || res.Problems[0].Sequence != 2 || len(res.Applied) != 3 || s.Cursor("g") != 3 {
		t.Fatalf("result = %+v", res)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if s.Cursor("g") != 3 || len(s.Items("g")) != 0 {
		t.Fatalf("after rebuild: cursor %d items %v", s.Cursor("g"), s.Items("g"))
	}
}

func TestApplyOrganizationEvents(t *testing.T) {
	ev := protocol.Event{
		EventID: "evt-org-1", Type: protocol.EvtSessionOpened, Actor: protocol.Actor{Kind: protocol.ActorService, ID: "org"},
		CausationID: "act-1", CorrelationID: "c", OccurredAt: protocol.NewTime(t0), AcceptedBy: "authority-1",
		Payload:   json.RawMessage(`{"agentId":"worker-1","sessionEpoch":2,"agentCardHash":"sha256:00"}`),
		Signature: protocol.Signature{Alg: "Ed25519", KeyID: "authority-1#k1", CreatedAt: protocol.NewTime(t0), Value: "x"},
	}
	in := mustIncoming(&ev)
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	res := mustApply(t, s, in, in)
	if len(res.Org) != 1 || len(res.Duplicates) != 1 || len(res.Cursors) != 0 || len(s.GroupIDs()) != 0 {
		t.Fatalf("result = %+v groups %v", res, s.GroupIDs())
	}
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if res := mustApply(t, s, in); len(res.Duplicates) != 1 || len(res.Org) != 0 {
		t.Fatalf("after restart: %+v", res)
	}
}

func TestApplyTwoGroupsInterleaved(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randomStream("grp-a", 10, r), randomStream("grp-b", 10, r)
	want := reference(t, []string{"grp-a", "grp-b"}, append(slices.Clone(a.evs), b.evs...))
	// One connection: the Groups interleave, and each arrives with local
	// reordering. Sequence numbers overlap across Groups on purpose.
	var mixed []Incoming
	ia, ib := 0, 0
	for ia < len(a.evs) || ib < len(b.evs) {
		if ib >= len(b.evs) || (ia < len(a.evs) && r.IntN(2) == 0) {
			mixed = append(mixed, a.evs[ia])
			ia++
		} else {
			mixed = append(mixed, b.evs[ib])
			ib++
		}
	}
	for i := 0; i+1 < len(mixed); i += 3 {
		mixed[i], mixed[i+1] = mixed[i+1], mixed[i]
	}
	s := openTest(t, t.TempDir(), fast)
	batches := 0
	for i := 0; i < len(mixed); i += 7 {
		mustApply(t, s, mixed[i:min(i+7, len(mixed))]...)
		batches++
	}
	if got := stateOf(t, s, []string{"grp-a", "grp-b"}); !reflect.DeepEqual(got, want) {
		t.Errorf("interleaved Groups differ from separate in-order delivery")
	}
	if int(s.commits.Load()) > batches {
		t.Errorf("%d commits for %d batches", s.commits.Load(), batches)
	}
}

func TestApplyAnswersOutbox(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.message("m")
	s := openTest(t, t.TempDir(), fast)
	cmd := []byte(`{"actionId":"act-g-2","type":"message.post","groupId":"g"}`)
	if err := s.PutOutbox("act-g-2", cmd); err != nil {
		t.Fatal(err)
	}
	res := mustApply(t, s, st.evs...)
	if !slices.Equal(res.Answered, []string{"act-g-2"}) {
		t.Fatalf("answered %v", res.Answered)
	}
	for e, err := range s.Outbox() {
		t.Fatalf("outbox still holds %+v %v", e, err)
	}
}

func TestApplyFailureLeavesNothing(t *testing.T) {
	st := randomStream("g", 8, rand.New(rand.NewPCG(9, 9)))
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSocket: true})
	half := len(st.evs) / 2
	mustApply(t, s, st.evs[:half]...)
	before := stateOf(t, s, []string{"g"})
	items := s.Items("g")

	// The process dies after writing the batch, before the commit.
	boom := errors.New("crash before commit")
	s.failApply = func() error { return boom }
	if _, err := s.Apply(append(st.evs[half:], st.evs[half+2])); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.failApply = nil
	if got := stateOf(t, s, []string{"g"}); !reflect.DeepEqual(got, before) || !reflect.DeepEqual(s.Items("g"), items) || len(s.Buffers()) != 0 {
		t.Fatalf("a failed batch left traces")
	}
	closeChecked(t, s)

	s = openTest(t, dir, Options{NoSocket: true})
	if got := stateOf(t, s, []string{"g"}); !reflect.DeepEqual(got, before) {
		t.Fatalf("reopened store differs")
	}
	// The replay after the cursor completes the stream, nothing twice.
	res := mustApply(t, s, st.evs[half-2:]...)
	if len(res.Duplicates) != 2 || len(res.Applied) != len(st.evs)-half {
		t.Fatalf("replay: %d duplicates, %d applied", len(res.Duplicates), len(res.Applied))
	}
	if got, want := stateOf(t, s, []string{"g"}), reference(t, []string{"g"}, st.evs); !reflect.DeepEqual(got, want) {
		t.Errorf("final state differs from in-order delivery")
	}
}

func TestRestartRebuildAndReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, b := randomStream("grp-a", 15, r), randomStream("grp-b", 6, r)
	groups := []string{"grp-a", "grp-b"}
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSocket: true})
	cut := len(a.evs) / 2
	mustApply(t, s, a.evs[:cut]...)
	mustApply(t, s, b.evs...)
	mustApply(t, s, a.evs[cut+3:cut+6]...) // held beyond a gap: lost at restart
	before, items, cursors := stateOf(t, s, groups), s.Items("grp-a"), s.Cursors()
	closeChecked(t, s)

	s = openTest(t, dir, Options{NoSocket: true})
	if got := stateOf(t, s, groups); !reflect.DeepEqual(got, before) {
		t.Fatalf("restart changed the file")
	}
	if got := s.Items("grp-a"); !reflect.DeepEqual(got, items) {
		for i := range got {
			if !reflect.DeepEqual(got[i], items[i]) {
				t.Errorf("item %d after restart = %+v\nwant %+v", i, got[i], items[i])
			}
		}
		t.Fatalf("restart changed the view")
	}
	if !reflect.DeepEqual(s.Cursors(), cursors) {
		t.Fatalf("restart changed cursors %v, want %v", s.Cursors(), cursors)
	}
	if len(s.Buffers()) != 0 {
		t.Fatalf("buffers survived a restart: %+v", s.Buffers())
	}
	// Rebuild from the inbox, and again after deleting the queue buckets by
	// hand: byte-identical.
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, groups); !reflect.DeepEqual(got, before) || !reflect.DeepEqual(s.Items("grp-a"), items) {
		t.Fatalf("rebuild differs:\n%s\nwant\n%s", got["grp-a"], before["grp-a"])
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, g := range groups {
			if err := tx.Bucket(bktGroups).Bucket([]byte(g)).DeleteBucket(bktQueue); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, groups); !reflect.DeepEqual(got, before) {
		t.Fatalf("rebuild after deleting the queue buckets differs")
	}
	// Reconnect: the authority replays from the cursor, with duplicates
	// around the disconnection.
	res := mustApply(t, s, a.evs[cut-4:]...)
	if len(res.Duplicates) != 4 || s.Cursor("grp-a") != uint64(len(a.evs)) {
		t.Fatalf("replay: %d duplicates, cursor %d", len(res.Duplicates), s.Cursor("grp-a"))
	}
	all := append(slices.Clone(a.evs), b.evs...)
	if got, want := stateOf(t, s, groups), reference(t, groups, all); !reflect.DeepEqual(got, want) {
		t.Errorf("after replay the store differs from in-order delivery")
	}
}

func TestSchemaVersionCheck(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	closeChecked(t, s)
	db, err := bolt.Open(dir+"/"+FileName, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktMeta).Put(keySchema, u64(SchemaVersion+1)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir, fast); !errors.Is(err, ErrSchema) {
		t.Fatalf("open of a newer schema: %v", err)
	}
	if _, err := OpenReader(dir, 0); !errors.Is(err, ErrSchema) {
		t.Fatalf("read-only open of a newer schema: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	s := openTest(t, t.TempDir(), fast)
	closeChecked(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Apply(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("apply after close: %v", err)
	}
	if err := s.PutOutbox("a", []byte(`{"actionId":"a"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("put after close: %v", err)
	}
}

func TestApplyTracksMemberships(t *testing.T) {
	me := protocol.Actor{Kind: protocol.ActorAgent, ID: self}
	st := newStream("g")
	st.missionCreated()
	st.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
	st.member(protocol.EvtMembershipChanged, "worker-2", 1, protocol.MembershipActive)
	st.member(protocol.EvtMembershipChanged, self, 2, protocol.MembershipActive)
	st.member(protocol.EvtMembershipEnded, "worker-2", 2, protocol.MembershipEnded)
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	if _, ok := s.Membership("g", me); ok {
		t.Fatal("membership before any event")
	}
	res := mustApply(t, s, st.evs[:3]...)
	want := []MemberRef{{GroupID: "g", Principal: me}, {GroupID: "g", Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "worker-2"}}}
	if !reflect.DeepEqual(res.Members, want) {
		t.Fatalf("Members = %+v, want %+v", res.Members, want)
	}
	mustApply(t, s, st.evs[3:]...)
	if m, ok := s.Membership("g", me); !ok || m.Epoch != 2 || !m.Active() || m.UpdatedSeq != 4 {
		t.Fatalf("own membership = %+v %v", m, ok)
	}
	w2 := protocol.Actor{Kind: protocol.ActorAgent, ID: "worker-2"}
	if m, ok := s.Membership("g", w2); !ok || m.Active() || m.Epoch != 2 {
		t.Fatalf("ended membership = %+v %v", m, ok)
	}
	// A message event changes no membership; a human principal is kept too.
	res = mustApply(t, s, st.add(protocol.EvtMessagePosted, protocol.AggregateMessage, "msg-1", "coord-1", obj{"messageId": "msg-1", "text": "x"}))
	if len(res.Members) != 0 {
		t.Fatalf("message changed memberships: %+v", res.Members)
	}
	members := s.Members("g")
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if !reflect.DeepEqual(s.Members("g"), members) || len(members) != 2 {
		t.Fatalf("after reopen %+v, want %+v", s.Members("g"), members)
	}
	before := dumpProjection(t, s.db, "g")
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := dumpProjection(t, s.db, "g"); got != before || !reflect.DeepEqual(s.Members("g"), members) {
		t.Fatalf("rebuild changed memberships:\n%s\nwant\n%s", got, before)
	}
}

// A file whose projection an older build wrote (no memberships, no
// projection version) is rebuilt by replay on Open.
func TestOpenUpgradesOldProjection(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.member(protocol.EvtMembershipChanged, self, 4, protocol.MembershipActive)
	st.authorized("wi-1", testContract(1, protocol.UrgencyHigh, false))
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	mustApply(t, s, st.evs...)
	want := dumpProjection(t, s.db, "g")
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktMeta).Delete(keyProjection); err != nil {
			return err
		}
		meta := tx.Bucket(bktGroups).Bucket([]byte("g")).Bucket(bktMeta)
		if err := meta.Delete(keyMembers); err != nil {
			return err
		}
		return tx.Bucket(bktGroups).Bucket([]byte("g")).Bucket(bktQueue).Delete([]byte("wi-1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if got := dumpProjection(t, s.db, "g"); got != want {
		t.Fatalf("upgraded projection:\n%s\nwant\n%s", got, want)
	}
	if m, ok := s.Membership("g", protocol.Actor{Kind: protocol.ActorAgent, ID: self}); !ok || m.Epoch != 4 {
		t.Fatalf("membership after upgrade = %+v %v", m, ok)
	}
	if _, ok := s.Item("g", "wi-1"); !ok {
		t.Fatal("item lost by the upgrade")
	}
}

// An eventId the authority reuses under another sequence is refused within
// the window of recent ids, also after a restart (the window is refilled
// from the inbox tail) and within one batch; the window stays bounded.
func TestApplyRefusesReusedEventID(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	for i := 0; i < RecentEventIDs+10; i++ {
		st.message("m")
	}
	reuse := func(of Incoming, seq uint64) Incoming {
		var ev protocol.Event
		if err := json.Unmarshal(of.Raw, &ev); err != nil {
			t.Fatal(err)
		}
		ev.Sequence = protocol.Uint64(seq)
		return mustIncoming(&ev)
	}
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	mustApply(t, s, st.evs...)
	n := uint64(len(st.evs))
	last := st.evs[len(st.evs)-1]
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if w := s.groups["g"].recent; len(w.seq) != RecentEventIDs || len(w.ring) != RecentEventIDs {
		t.Fatalf("window after reopen holds %d ids (%d in ring), want %d", len(w.seq), len(w.ring), RecentEventIDs)
	}
	res := mustApply(t, s, reuse(last, n+1))
	if len(res.Rejected) != 1 || len(res.Applied) != 0 || s.Cursor("g") != n {
		t.Fatalf("reused id after restart: %+v", res)
	}
	// Within one batch: a fresh event, then its id again at the next sequence.
	st.message("fresh")
	fresh := st.evs[len(st.evs)-1]
	res = mustApply(t, s, fresh, reuse(fresh, n+2))
	if len(res.Applied) != 1 || len(res.Rejected) != 1 || s.Cursor("g") != n+1 {
		t.Fatalf("reused id in one batch: %+v", res)
	}
}
