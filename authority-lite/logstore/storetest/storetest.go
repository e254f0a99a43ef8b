// Package storetest is the behaviour every logstore.Store must have, as
// one suite each implementation runs against itself.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

// Opener opens the store under test; called again after Close it opens
// the same log (a restart).
type Opener func(t *testing.T) logstore.Store

// Run runs the suite. newStore returns an Opener for a fresh, empty log.
func Run(t *testing.T, newStore func(t *testing.T) Opener) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"AppendRead", appendRead},
		{"Conflict", conflict},
		{"Race", race},
		{"Receipts", receipts},
		{"Trim", trim},
		{"Records", records},
		{"Reopen", reopen},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

func ev(group string, seq uint64) []byte {
	return fmt.Appendf(nil, `{"groupId":%q,"sequence":%d}`, group, seq)
}

func events(group string, after uint64, n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, ev(group, after+1+uint64(i)))
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type read struct {
	seq uint64
	raw string
}

func readAll(t *testing.T, s logstore.Store, g string, after uint64, max int) []read {
	t.Helper()
	var out []read
	must(t, s.Read(context.Background(), g, after, max, func(seq uint64, raw []byte) bool {
		out = append(out, read{seq, string(raw)})
		return true
	}))
	return out
}

func wantBounds(t *testing.T, s logstore.Store, g string, first, last uint64) {
	t.Helper()
	f, l, err := s.Bounds(context.Background(), g)
	must(t, err)
	if f != first || l != last {
		t.Fatalf("%s bounds = [%d, %d], want [%d, %d]", g, f, l, first, last)
	}
}

func wantEvents(t *testing.T, got []read, g string, from, to uint64) {
	t.Helper()
	if len(got) != int(to+1-from) {
		t.Fatalf("read %d events of %s, want %d..%d", len(got), g, from, to)
	}
	for i, r := range got {
		seq := from + uint64(i)
		if r.seq != seq || r.raw != string(ev(g, seq)) {
			t.Fatalf("event %d of %s = (%d, %s), want sequence %d", i, g, r.seq, r.raw, seq)
		}
	}
}

func appendRead(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	wantBounds(t, s, "g1", 1, 0)
	if got := readAll(t, s, "g1", 0, 0); len(got) != 0 {
		t.Fatalf("an unwritten Group read %d events", len(got))
	}
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g1", After: 0, Events: events("g1", 0, 3)}))
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g1", After: 3, Events: events("g1", 3, 1)}))
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g2", After: 0, Events: events("g2", 0, 2)}))
	wantBounds(t, s, "g1", 1, 4)
	wantBounds(t, s, "g2", 1, 2)
	wantEvents(t, readAll(t, s, "g1", 0, 0), "g1", 1, 4)
	wantEvents(t, readAll(t, s, "g1", 1, 2), "g1", 2, 3)
	wantEvents(t, readAll(t, s, "g1", 4, 0), "g1", 5, 4)
	wantEvents(t, readAll(t, s, "g2", 0, 0), "g2", 1, 2)
	var n int
	must(t, s.Read(ctx, "g1", 0, 0, func(uint64, []byte) bool { n++; return n < 2 }))
	if n != 2 {
		t.Fatalf("read went on after fn returned false: %d calls", n)
	}
	gs, err := s.Groups(ctx)
	must(t, err)
	if !slices.Equal(gs, []string{"g1", "g2"}) {
		t.Fatalf("groups = %v", gs)
	}
}

func conflict(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 0, Events: events("g", 0, 2)}))
	for _, after := range []uint64{0, 1, 3} {
		err := s.Append(ctx, logstore.Commit{GroupID: "g", After: after, Events: events("g", after, 1),
			Receipts: []logstore.Receipt{{Key: fmt.Sprint("r", after), Value: []byte("x")}}})
		if !errors.Is(err, logstore.ErrConflict) {
			t.Fatalf("append after %d of a Group at 2: %v, want a conflict", after, err)
		}
		var ce *logstore.ConflictError
		if errors.As(err, &ce) && ce.Last != 2 {
			t.Fatalf("conflict says the Group is at %d, want 2", ce.Last)
		}
		if _, err := s.Receipt(ctx, fmt.Sprint("r", after)); !errors.Is(err, logstore.ErrNotFound) {
			t.Fatalf("a refused commit stored its receipt: %v", err)
		}
	}
	wantBounds(t, s, "g", 1, 2)
	wantEvents(t, readAll(t, s, "g", 0, 0), "g", 1, 2)
}

// race has deciders append to the same Groups at once, each reading the
// last sequence and retrying on a conflict, as authority replicas do:
// every append lands once, in one gap-free order.
func race(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	const deciders, each = 4, 12
	groups := []string{"ga", "gb"}
	var wg sync.WaitGroup
	errs := make(chan error, deciders)
	for d := range deciders {
		wg.Go(func() {
			for i := range each {
				g := groups[(d+i)%len(groups)]
				key := fmt.Sprintf("d%d.%d", d, i)
				for {
					_, last, err := s.Bounds(ctx, g)
					if err != nil {
						errs <- err
						return
					}
					err = s.Append(ctx, logstore.Commit{GroupID: g, After: last, Events: events(g, last, 1+i%2),
						Receipts: []logstore.Receipt{{Key: key, Value: []byte(g)}}})
					if errors.Is(err, logstore.ErrConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var total uint64
	for _, g := range groups {
		_, last, err := s.Bounds(ctx, g)
		must(t, err)
		wantEvents(t, readAll(t, s, g, 0, 0), g, 1, last)
		total += last
	}
	if want := uint64(deciders * (each + each/2)); total != want {
		t.Fatalf("%d events stored, want %d: an append was lost or doubled", total, want)
	}
	for d := range deciders {
		for i := range each {
			if _, err := s.Receipt(ctx, fmt.Sprintf("d%d.%d", d, i)); err != nil {
				t.Fatalf("receipt d%d.%d: %v", d, i, err)
			}
		}
	}
}

func receipts(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Receipt(ctx, "agent\x00a1\x00act-1"); !errors.Is(err, logstore.ErrNotFound) {
		t.Fatalf("missing receipt: %v", err)
	}
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 0, Events: events("g", 0, 1),
		Receipts: []logstore.Receipt{{Key: "agent\x00a1\x00act-1", Value: []byte(`{"r":1}`)}}}))
	got, err := s.Receipt(ctx, "agent\x00a1\x00act-1")
	must(t, err)
	if string(got) != `{"r":1}` {
		t.Fatalf("receipt = %s", got)
	}
	// The same command decided again (another replica, a retry): refused
	// whole, though the Group's sequence matches.
	err = s.Append(ctx, logstore.Commit{GroupID: "g", After: 1, Events: events("g", 1, 1),
		Receipts: []logstore.Receipt{{Key: "agent\x00a1\x00act-1", Value: []byte(`{"r":2}`)}}})
	if !errors.Is(err, logstore.ErrReceiptExists) {
		t.Fatalf("second receipt under one key: %v", err)
	}
	wantBounds(t, s, "g", 1, 1)
	got, _ = s.Receipt(ctx, "agent\x00a1\x00act-1")
	if string(got) != `{"r":1}` {
		t.Fatalf("receipt overwritten: %s", got)
	}
}

func trim(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 0, Events: events("g", 0, 5)}))
	must(t, s.Trim(ctx, "g", 4))
	wantBounds(t, s, "g", 4, 5)
	if err := s.Read(ctx, "g", 1, 0, func(uint64, []byte) bool { return true }); !errors.Is(err, logstore.ErrTrimmed) {
		t.Fatalf("read below the online log: %v", err)
	}
	wantEvents(t, readAll(t, s, "g", 3, 0), "g", 4, 5)
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 5, Events: events("g", 5, 1)}))
	wantEvents(t, readAll(t, s, "g", 3, 0), "g", 4, 6)
	must(t, s.Trim(ctx, "g", 7))
	wantBounds(t, s, "g", 7, 6)
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 6, Events: events("g", 6, 1)}))
	wantEvents(t, readAll(t, s, "g", 6, 0), "g", 7, 7)
	if err := s.Trim(ctx, "g", 9); err == nil {
		t.Fatal("trimmed past the last sequence")
	}
}

func records(t *testing.T, open Opener) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	for _, tb := range logstore.Tables {
		if _, _, err := s.Get(ctx, tb, "a1"); !errors.Is(err, logstore.ErrNotFound) {
			t.Fatalf("%s: missing record: %v", tb, err)
		}
	}
	r1, err := s.Put(ctx, logstore.Agents, "a1", []byte("v1"), 0)
	must(t, err)
	if _, err := s.Put(ctx, logstore.Agents, "a1", []byte("v1b"), 0); !errors.Is(err, logstore.ErrConflict) {
		t.Fatalf("create of an existing record: %v", err)
	}
	val, rev, err := s.Get(ctx, logstore.Agents, "a1")
	must(t, err)
	if string(val) != "v1" || rev != r1 {
		t.Fatalf("get = %s@%d, want v1@%d", val, rev, r1)
	}
	r2, err := s.Put(ctx, logstore.Agents, "a1", []byte("v2"), r1)
	must(t, err)
	if r2 == r1 || r2 == 0 {
		t.Fatalf("revision %d after %d", r2, r1)
	}
	if _, err := s.Put(ctx, logstore.Agents, "a1", []byte("v3"), r1); !errors.Is(err, logstore.ErrConflict) {
		t.Fatalf("put at a stale revision: %v", err)
	}
	if err := s.Delete(ctx, logstore.Agents, "a1", r1); !errors.Is(err, logstore.ErrConflict) {
		t.Fatalf("delete at a stale revision: %v", err)
	}
	// Keys carry what the authority's keys carry: NUL, colons, dots.
	for _, k := range []string{"b\x00n.1", "a:z", "a2"} {
		_, err := s.Put(ctx, logstore.Nonces, k, []byte(k), 0)
		must(t, err)
	}
	var keys []string
	must(t, s.Records(ctx, logstore.Nonces, func(k string, v []byte) error {
		if string(v) != k {
			t.Fatalf("record %q holds %q", k, v)
		}
		keys = append(keys, k)
		return nil
	}))
	if !slices.Equal(keys, []string{"a2", "a:z", "b\x00n.1"}) {
		t.Fatalf("records = %q", keys)
	}
	must(t, s.Delete(ctx, logstore.Agents, "a1", r2))
	if _, _, err := s.Get(ctx, logstore.Agents, "a1"); !errors.Is(err, logstore.ErrNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
	if _, err := s.Put(ctx, logstore.Agents, "a1", []byte("again"), 0); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func reopen(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 0, Events: events("g", 0, 3),
		Receipts: []logstore.Receipt{{Key: "k", Value: []byte("r")}}}))
	must(t, s.Trim(ctx, "g", 2))
	_, err := s.Put(ctx, logstore.Agents, "a1", []byte("v1"), 0)
	must(t, err)
	must(t, s.Close())
	if err := s.Append(ctx, logstore.Commit{GroupID: "g", After: 3, Events: events("g", 3, 1)}); err == nil {
		t.Fatal("append after close")
	}

	s = open(t)
	defer s.Close()
	wantBounds(t, s, "g", 2, 3)
	wantEvents(t, readAll(t, s, "g", 1, 0), "g", 2, 3)
	if v, err := s.Receipt(ctx, "k"); err != nil || string(v) != "r" {
		t.Fatalf("receipt after reopen: %s, %v", v, err)
	}
	if v, _, err := s.Get(ctx, logstore.Agents, "a1"); err != nil || string(v) != "v1" {
		t.Fatalf("record after reopen: %s, %v", v, err)
	}
	must(t, s.Append(ctx, logstore.Commit{GroupID: "g", After: 3, Events: events("g", 3, 1)}))
	wantBounds(t, s, "g", 2, 4)
}
