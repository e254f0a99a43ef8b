package toolkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

var opA = Op{"mis-a", "wi-7", 3, "git.push"}

func TestDoCallsOnceThenReplays(t *testing.T) {
	path := tempDBPath(t)
	db := openDB(t, path)
	l := openLedger(t, db, Options{})
	svc := newService()
	ctx := context.Background()

	var gotKey string
	var gotAttempt uint64
	res, err := l.Do(ctx, opA, func(ctx context.Context, key string, attempt uint64) ([]byte, error) {
		gotKey, gotAttempt = key, attempt
		return callService(svc, opA)(ctx, key, attempt)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := keyKAT[0].want
	if gotKey != want || gotAttempt != 1 || res.Key != want || res.Attempt != 1 || res.Replayed {
		t.Fatalf("first Do: call(%s, %d), result %+v", gotKey, gotAttempt, res)
	}
	if !bytes.Equal(res.Value, svc.firstResponse(want)) {
		t.Fatalf("value %q, service answered %q", res.Value, svc.firstResponse(want))
	}
	first := res.Value

	check := func(l *Ledger) {
		t.Helper()
		res, err := l.Do(ctx, opA, mustNotCall(t))
		if err != nil || !res.Replayed || res.Attempt != 1 || res.Key != want || !bytes.Equal(res.Value, first) {
			t.Fatalf("replay: %+v, %v", res, err)
		}
		rec, ok, err := l.Lookup(want)
		if err != nil || !ok || rec.State != StateCompleted || rec.Attempts != 1 || rec.Op != opA || rec.Key != want ||
			!bytes.Equal(rec.Result, first) || rec.StartedAt.IsZero() || !rec.UpdatedAt.After(rec.StartedAt) {
			t.Fatalf("Lookup: %+v %v %v", rec, ok, err)
		}
	}
	check(l)
	db.Close()
	check(openLedger(t, openDB(t, path), Options{}))
	if n := svc.effectsOf(opBody(opA)); n != 1 {
		t.Fatalf("%d effects", n)
	}
}

func TestDoRetriesWithTheSameKey(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	errBusy := errors.New("service busy")
	var keys []string
	var attempts []uint64
	flaky := func(_ context.Context, key string, attempt uint64) ([]byte, error) {
		keys, attempts = append(keys, key), append(attempts, attempt)
		if attempt < 3 {
			return []byte("partial"), errBusy
		}
		return []byte("done"), nil
	}
	for i, wantErr := range []bool{true, true, false} {
		res, err := l.Do(context.Background(), opA, flaky)
		if (err != nil) != wantErr || res.Attempt != uint64(i+1) || res.Replayed {
			t.Fatalf("Do %d: %+v, %v", i+1, res, err)
		}
		if wantErr {
			if !errors.Is(err, errBusy) || res.Value != nil {
				t.Fatalf("Do %d: error %v, value %q", i+1, err, res.Value)
			}
			rec, _, _ := l.Lookup(res.Key)
			if rec.State != StateFailed || rec.Error != errBusy.Error() || rec.Result != nil {
				t.Fatalf("after failure: %+v", rec)
			}
		}
	}
	if len(keys) != 3 || keys[0] != keys[1] || keys[1] != keys[2] || attempts[2] != 3 {
		t.Fatalf("keys %v attempts %v", keys, attempts)
	}
	if res, err := l.Do(context.Background(), opA, mustNotCall(t)); err != nil || string(res.Value) != "done" || res.Attempt != 3 {
		t.Fatalf("replay: %+v %v", res, err)
	}
}

func TestAttemptBudget(t *testing.T) {
	fail := func(context.Context, string, uint64) ([]byte, error) { return nil, errors.New("boom") }
	cases := []struct {
		name string
		opts Options
		do   func(l *Ledger, call Call) (Result, error)
	}{
		{"Options.MaxAttempts", Options{MaxAttempts: 2}, func(l *Ledger, c Call) (Result, error) { return l.Do(context.Background(), opA, c) }},
		{"DoLimited", Options{}, func(l *Ledger, c Call) (Result, error) { return l.DoLimited(context.Background(), opA, 2, c) }},
		{"DoLimited overrides", Options{MaxAttempts: 9}, func(l *Ledger, c Call) (Result, error) {
			return l.DoLimited(context.Background(), opA, 2, c)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openLedger(t, openDB(t, tempDBPath(t)), c.opts)
			for i := range 2 {
				if _, err := c.do(l, fail); err == nil || errors.Is(err, ErrExhausted) {
					t.Fatalf("attempt %d: %v", i+1, err)
				}
			}
			_, err := c.do(l, mustNotCall(t))
			if !errors.Is(err, ErrExhausted) {
				t.Fatalf("third Do: %v", err)
			}
			// A larger budget lets the operation go on, under its key.
			res, err := l.DoLimited(context.Background(), opA, 3, func(_ context.Context, key string, n uint64) ([]byte, error) {
				return []byte(AttemptKey(key, n)), nil
			})
			if err != nil || string(res.Value) != AttemptKey(keyKAT[0].want, 3) {
				t.Fatalf("with budget 3: %+v %v", res, err)
			}
		})
	}
}

func TestPermanentFailureIsNeverRetried(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	errDenied := errors.New("402 card declined")
	_, err := l.Do(context.Background(), opA, func(context.Context, string, uint64) ([]byte, error) {
		return nil, Permanent(errDenied)
	})
	if !errors.Is(err, errDenied) || !IsPermanent(err) {
		t.Fatalf("first Do: %v", err)
	}
	_, err = l.Do(context.Background(), opA, mustNotCall(t))
	if !errors.Is(err, ErrPermanent) {
		t.Fatalf("second Do: %v", err)
	}
	rec, _, _ := l.Lookup(keyKAT[0].want)
	if rec.State != StateFailedPermanently || rec.Error != errDenied.Error() {
		t.Fatalf("record %+v", rec)
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
}

func TestFencing(t *testing.T) {
	path := tempDBPath(t)
	db := openDB(t, path)
	l := openLedger(t, db, Options{})
	ctx := context.Background()
	svc := newService()
	at := func(epoch uint64) Op { o := opA; o.OwnershipEpoch = epoch; return o }
	do := func(l *Ledger, op Op) error {
		_, err := l.Do(ctx, op, callService(svc, op))
		return err
	}
	stale := func(l *Ledger, op Op) {
		t.Helper()
		res, err := l.Do(ctx, op, mustNotCall(t))
		if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership || res.Replayed {
			t.Fatalf("Do at epoch %d: %+v, %v; want WORK_STALE_OWNERSHIP", op.OwnershipEpoch, res, err)
		}
	}
	if err := do(l, at(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Fence("mis-a", "wi-7", 5); err != nil {
		t.Fatal(err)
	}
	stale(l, at(3)) // completed, but its ownership is over: no replay either
	stale(l, at(4))
	if err := l.Fence("mis-a", "wi-7", 2); err != nil { // never lowers
		t.Fatal(err)
	}
	stale(l, at(4))
	if err := do(l, at(5)); err != nil {
		t.Fatal(err)
	}
	// Starting an attempt at a higher epoch fences the lower ones.
	if err := do(l, at(7)); err != nil {
		t.Fatal(err)
	}
	stale(l, at(5))
	// Fences are per WorkItem of a Mission.
	for _, op := range []Op{{"mis-a", "wi-8", 1, "git.push"}, {"mis-b", "wi-7", 1, "git.push"}} {
		if err := do(l, op); err != nil {
			t.Fatalf("%+v: %v", op, err)
		}
	}
	k5, _ := Key(at(5))
	k7, _ := Key(at(7))
	if k5 == k7 || svc.requestsOf(k5) != 1 || svc.requestsOf(k7) != 1 {
		t.Fatalf("epochs 5 and 7 keys %s %s, requests %d %d", k5, k7, svc.requestsOf(k5), svc.requestsOf(k7))
	}
	db.Close()
	l = openLedger(t, openDB(t, path), Options{})
	stale(l, at(6))
	if f, err := l.FenceOf("mis-a", "wi-7"); err != nil || f != 7 {
		t.Fatalf("FenceOf after reopen: %d %v", f, err)
	}
	if f, err := l.FenceOf("mis-z", "wi-7"); err != nil || f != 0 {
		t.Fatalf("FenceOf unknown: %d %v", f, err)
	}
	for _, bad := range []struct {
		m, w string
		e    uint64
	}{{"", "wi", 1}, {"m", "", 1}, {"m", "w\xff", 1}, {"m", "w", protocol.MaxSafeInteger + 1}} {
		if err := l.Fence(bad.m, bad.w, bad.e); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
			t.Errorf("Fence(%q, %q, %d): %v", bad.m, bad.w, bad.e, err)
		}
	}
}

// A fence landing between Do's read and its start is still honoured: the
// start transaction decides again.
func TestFenceRacingAStart(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	l.beforeStart = func() {
		if err := l.Fence(opA.MissionID, opA.WorkItemID, opA.OwnershipEpoch+1); err != nil {
			t.Error(err)
		}
	}
	_, err := l.Do(context.Background(), opA, mustNotCall(t))
	if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership {
		t.Fatalf("Do: %v", err)
	}
	if _, ok, _ := l.Lookup(keyKAT[0].want); ok {
		t.Fatal("a refused operation left a record")
	}
}

func TestDoRejectsBadOps(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	for _, op := range []Op{{}, {"m", "w", 1, ""}, {"m", "w", protocol.MaxSafeInteger + 1, "op"}, {"m\xff", "w", 1, "op"}} {
		if _, err := l.Do(context.Background(), op, mustNotCall(t)); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
			t.Errorf("Do(%#v): %v", op, err)
		}
	}
	n := 0
	l.Records(func(Record) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d records", n)
	}
}

func TestDoHonoursContext(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Do(cancelled, opA, mustNotCall(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Do: %v", err)
	}
	if _, ok, _ := l.Lookup(keyKAT[0].want); ok {
		t.Fatal("a cancelled Do recorded an attempt")
	}
	// A Do waiting for the same key gives up with its context.
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := l.Do(context.Background(), opA, func(context.Context, string, uint64) ([]byte, error) {
			close(entered)
			<-release
			return []byte("ok"), nil
		})
		done <- err
	}()
	<-entered
	short, cancel2 := context.WithCancel(context.Background())
	waitErr := make(chan error)
	go func() {
		_, err := l.Do(short, opA, mustNotCall(t))
		waitErr <- err
	}()
	waitForWaiters(t, l, keyKAT[0].want, 2)
	cancel2()
	if err := <-waitErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Do: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(l.locks) != 0 {
		t.Fatalf("%d key locks left", len(l.locks))
	}
}

// waitForWaiters spins (bounded) until n Do calls hold or wait for key.
func waitForWaiters(t testing.TB, l *Ledger, key string, n int) {
	t.Helper()
	for i := 0; i < 10_000_000; i++ {
		l.mu.Lock()
		kl := l.locks[key]
		got := 0
		if kl != nil {
			got = kl.refs
		}
		l.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("fewer than %d Do calls on %s", n, key)
}

func TestRecordsListsEveryKeyInOrder(t *testing.T) {
	l := openLedger(t, openDB(t, tempDBPath(t)), Options{})
	want := map[string]State{}
	for i, st := range []State{StateCompleted, StateFailed, StateFailedPermanently, StateCompleted} {
		op := Op{"mis-a", "wi-1", 1, fmt.Sprintf("op-%d", i)}
		l.Do(context.Background(), op, func(context.Context, string, uint64) ([]byte, error) {
			switch st {
			case StateFailed:
				return nil, errors.New("x")
			case StateFailedPermanently:
				return nil, Permanent(errors.New("y"))
			}
			return []byte(op.OperationID), nil
		})
		k, _ := Key(op)
		want[k] = st
	}
	var prev string
	got := 0
	err := l.Records(func(r Record) error {
		if r.Key <= prev || want[r.Key] != r.State {
			return fmt.Errorf("record %s %s after %s", r.Key, r.State, prev)
		}
		if k, _ := Key(r.Op); k != r.Key {
			return fmt.Errorf("record %s holds op %+v", r.Key, r.Op)
		}
		prev = r.Key
		got++
		return nil
	})
	if err != nil || got != len(want) {
		t.Fatalf("%d records, %v", got, err)
	}
	stop := errors.New("stop")
	if err := l.Records(func(Record) error { return stop }); err != stop {
		t.Fatalf("Records did not return fn's error: %v", err)
	}
}
