package queue

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestReaderWhileTheWorkerRuns(t *testing.T) {
	st := randomStream("g", 6, rand.New(rand.NewPCG(2, 2)))
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSync: true, MaxBufferedEvents: 10})
	mustApply(t, s, st.evs[:10]...)
	mustApply(t, s, st.evs[12:14]...) // held beyond a gap: only the live worker knows
	if err := s.PutOutbox("act-1", command("act-1", "work.start")); err != nil {
		t.Fatal(err)
	}

	// The worker holds the exclusive flock: a second open of the same file
	// gets its copy through the socket instead of waiting.
	r, err := OpenReader(dir, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Live() {
		t.Fatalf("reader opened the locked file directly")
	}
	rep, err := r.Report()
	if err != nil {
		t.Fatal(err)
	}
	items, err := r.Items("g")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(items, s.Items("g")) {
		t.Errorf("reader items differ from the worker's")
	}
	if len(rep.Groups) != 1 || rep.Groups[0].Cursor != 10 || rep.Groups[0].InboxEvents != 10 || rep.Groups[0].InboxLast != 10 ||
		rep.Groups[0].Buffer == nil || rep.Groups[0].Buffer.FirstHeld != 13 || rep.Outbox.Pending != 1 || rep.Schema != SchemaVersion {
		t.Fatalf("report = %+v", rep)
	}
	if !reflect.DeepEqual(rep.Groups[0].Members, s.Members("g")) || len(rep.Groups[0].Members) != 2 {
		t.Errorf("report members %+v, worker's %+v", rep.Groups[0].Members, s.Members("g"))
	}
	if len(rep.Groups[0].Items) != len(items) {
		t.Fatalf("report items %d, want %d", len(rep.Groups[0].Items), len(items))
	}
	// The worker keeps writing while and after it served a copy.
	mustApply(t, s, st.evs[10:]...)
	if s.Cursor("g") != uint64(len(st.evs)) {
		t.Fatalf("cursor %d", s.Cursor("g"))
	}

	closeChecked(t, s)
	r, err = OpenReader(dir, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Live() {
		t.Fatalf("reader of a stopped worker claims to be live")
	}
	rep, err = r.Report()
	if err != nil || rep.Groups[0].Cursor != uint64(len(st.evs)) || rep.Groups[0].Buffer != nil {
		t.Fatalf("report = %+v, %v", rep, err)
	}
}

func TestReaderWithoutSocketFailsFast(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, fast) // NoSocket: nothing serves copies
	start := time.Now()
	if _, err := OpenReader(dir, 50*time.Millisecond); err == nil {
		t.Fatal("reader opened a locked store without a socket")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("reader waited for the lock")
	}
}

func TestReaderOfMissingStore(t *testing.T) {
	if _, err := OpenReader(t.TempDir(), time.Millisecond); err == nil {
		t.Fatal("reader opened a store that does not exist")
	}
}

func TestSecondWriterIsRefused(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, fast)
	if _, err := Open(dir, fast); err == nil || !errors.Is(err, bolt.ErrTimeout) {
		t.Fatalf("second writer: %v", err)
	}
}
