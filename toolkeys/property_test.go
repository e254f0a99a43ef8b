package toolkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/protocol"
)

// errCrash is panicked by a Call to end the "process" mid-operation; the
// test then reopens the file as a restarted worker would.
var errCrash = errors.New("crash")

type outcome int

const (
	outOK                outcome = iota // effect, response returned
	outFailBeforeEffect                 // transient error, nothing reached the service
	outFailAfterEffect                  // effect happened, response lost
	outPermanent                        // the service refused for good, no effect
	outCrashBeforeEffect                // the process dies before sending
	outCrashAfterEffect                 // the process dies after the effect
	numOutcomes
)

// modelKey is what the ledger must remember about one key.
type modelKey struct {
	attempts  uint64
	completed []byte // nil until completed
	done      bool
	permanent bool
}

type ledgerMachine struct {
	path   string
	db     *bolt.DB
	l      *Ledger
	svc    *service
	budget uint64 // 0: unlimited
	keys   map[string]*modelKey
	fences map[[2]string]uint64
}

func (m *ledgerMachine) open(rt *rapid.T) {
	db, err := bolt.Open(m.path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		rt.Fatal(err)
	}
	l, err := OpenLedgerWith(db, Options{MaxAttempts: m.budget})
	if err != nil {
		rt.Fatal(err)
	}
	m.db, m.l = db, l
}

func (m *ledgerMachine) restart(rt *rapid.T) {
	if err := m.db.Close(); err != nil {
		rt.Fatal(err)
	}
	m.open(rt)
}

func drawOp(rt *rapid.T) Op {
	return Op{
		MissionID:      rapid.SampledFrom([]string{"m1", "m2"}).Draw(rt, "mission"),
		WorkItemID:     rapid.SampledFrom([]string{"w1", "w2"}).Draw(rt, "workItem"),
		OwnershipEpoch: rapid.Uint64Range(1, 3).Draw(rt, "epoch"),
		OperationID:    rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "operation"),
	}
}

func (m *ledgerMachine) do(rt *rapid.T) {
	op := drawOp(rt)
	out := outcome(rapid.IntRange(0, int(numOutcomes)-1).Draw(rt, "outcome"))
	key, _ := Key(op)
	mk := m.keys[key]
	if mk == nil {
		mk = &modelKey{}
		m.keys[key] = mk
	}
	wi := [2]string{op.MissionID, op.WorkItemID}
	fence := m.fences[wi]
	// The model's verdict, straight from the contract of Do.
	wantCall := !(op.OwnershipEpoch < fence || mk.done || mk.permanent || (m.budget > 0 && mk.attempts >= m.budget))

	called := false
	call := func(_ context.Context, k string, attempt uint64) ([]byte, error) {
		called = true
		if k != key || attempt != mk.attempts+1 {
			rt.Fatalf("call(%s, %d), want (%s, %d)", k, attempt, key, mk.attempts+1)
		}
		switch out {
		case outFailBeforeEffect:
			return nil, errors.New("dial: refused")
		case outPermanent:
			return nil, Permanent(errors.New("400 bad request"))
		case outCrashBeforeEffect:
			panic(errCrash)
		}
		r, _ := m.svc.apply(k, []byte(opBody(op)))
		switch out {
		case outFailAfterEffect:
			return nil, errors.New("read: connection reset")
		case outCrashAfterEffect:
			panic(errCrash)
		}
		return r, nil
	}
	res, err, crashed := doRecovering(m.l, op, call)
	if called != wantCall {
		rt.Fatalf("called=%v, model says %v (fence %d, %+v, budget %d)", called, wantCall, fence, *mk, m.budget)
	}
	switch {
	case op.OwnershipEpoch < fence:
		if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership {
			rt.Fatalf("stale Do: %v", err)
		}
	case mk.done:
		if err != nil || !res.Replayed || !bytes.Equal(res.Value, mk.completed) {
			rt.Fatalf("completed result changed: %+v %v, recorded %q", res, err, mk.completed)
		}
	case mk.permanent:
		if !errors.Is(err, ErrPermanent) {
			rt.Fatalf("permanent: %v", err)
		}
	case !wantCall:
		if !errors.Is(err, ErrExhausted) {
			rt.Fatalf("exhausted: %v", err)
		}
	default:
		mk.attempts++
		m.fences[wi] = max(fence, op.OwnershipEpoch)
		switch {
		case crashed:
			m.restart(rt)
		case out == outOK:
			if err != nil || res.Replayed || !bytes.Equal(res.Value, m.svc.firstResponse(key)) {
				rt.Fatalf("fresh Do: %+v %v", res, err)
			}
			mk.done, mk.completed = true, res.Value
		case out == outPermanent:
			mk.permanent = true
			fallthrough
		default:
			if err == nil {
				rt.Fatalf("outcome %d: no error", out)
			}
		}
	}
}

// doRecovering runs Do; a Call panicking with errCrash ends it the way a
// killed process would, before the outcome is recorded.
func doRecovering(l *Ledger, op Op, call Call) (res Result, err error, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errCrash {
				panic(r)
			}
			crashed = true
		}
	}()
	res, err = l.Do(context.Background(), op, call)
	return res, err, false
}

func (m *ledgerMachine) fence(rt *rapid.T) {
	op := drawOp(rt)
	if err := m.l.Fence(op.MissionID, op.WorkItemID, op.OwnershipEpoch); err != nil {
		rt.Fatal(err)
	}
	wi := [2]string{op.MissionID, op.WorkItemID}
	m.fences[wi] = max(m.fences[wi], op.OwnershipEpoch)
}

// check holds after every step: at most one effect per logical operation,
// and the ledger agrees with the model on every key and fence.
func (m *ledgerMachine) check(rt *rapid.T) {
	m.svc.mu.Lock()
	for body, n := range m.svc.effects {
		if n > 1 {
			rt.Fatalf("%d effects for %s", n, body)
		}
	}
	m.svc.mu.Unlock()
	for key, mk := range m.keys {
		rec, ok, err := m.l.Lookup(key)
		if err != nil || ok != (mk.attempts > 0) {
			rt.Fatalf("Lookup(%s): %v %v, model %+v", key, ok, err, *mk)
		}
		if !ok {
			continue
		}
		if rec.Attempts != mk.attempts || (rec.State == StateCompleted) != mk.done ||
			(rec.State == StateFailedPermanently) != mk.permanent || !bytes.Equal(rec.Result, mk.completed) {
			rt.Fatalf("record %+v, model %+v", rec, *mk)
		}
	}
	for wi, want := range m.fences {
		if got, err := m.l.FenceOf(wi[0], wi[1]); err != nil || got != want {
			rt.Fatalf("fence of %v: %d %v, model %d", wi, got, err, want)
		}
	}
}

func TestPropertyLedger(t *testing.T) {
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		m := &ledgerMachine{
			path:   filepath.Join(t.TempDir(), fmt.Sprintf("p%d.db", n)),
			svc:    newService(),
			budget: rapid.SampledFrom([]uint64{0, 2, 4}).Draw(rt, "budget"),
			keys:   map[string]*modelKey{},
			fences: map[[2]string]uint64{},
		}
		m.open(rt)
		defer func() { m.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"do":      m.do,
			"fence":   m.fence,
			"restart": m.restart,
			"":        m.check,
		})
	})
}
