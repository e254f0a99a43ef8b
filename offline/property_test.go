package offline

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/protocol"
)

// windowModel is a naive restatement of the rules of spec 11.5 the Monitor
// implements, kept apart from its code.
type windowModel struct {
	grace     time.Duration // as configured
	state     State
	since     time.Time
	lastHeard time.Time
	leases    map[Item]Lease
	started   map[Item]time.Time
}

func (w *windowModel) effectiveGrace() time.Duration {
	switch {
	case w.grace == 0:
		return 2 * time.Minute
	case w.grace < 0:
		return 0
	}
	return min(w.grace, 10*time.Minute)
}

// end is when an item must have paused; zero when it may not run at all.
func (w *windowModel) end(it Item) time.Time {
	l, ok := w.leases[it]
	switch {
	case !ok:
		return time.Time{}
	case w.state == StateOnline, !l.Reversible, !w.since.Before(l.ExpiresAt):
		return l.ExpiresAt
	}
	return l.ExpiresAt.Add(w.effectiveGrace())
}

var propItems = []Item{{"grp-a", "wi-1"}, {"grp-b", "wi-1"}, {"grp-a", "wi-2"}}

// Random connect/disconnect/ping/time/lease/buffer/ack sequences: no start
// unless fully online, no run past the deadline, risky operations only
// online, every binding the worker builds passes the authority's check, the
// buffer never exceeds its bounds, refuses exactly at them, and keeps order.
func TestPropertyWindowAndBuffer(t *testing.T) {
	key := testKey(t)
	fullSeen, graceRuns := 0, 0
	defer func() {
		// The generator must reach the interesting edges, or the
		// invariants above prove little.
		if !t.Failed() && (fullSeen == 0 || graceRuns == 0) {
			t.Errorf("generator never filled the buffer (%d) or ran in a grace period (%d)", fullSeen, graceRuns)
		}
	}()
	prop := func(rt *rapid.T) {
		cfg := Config{Grace: time.Duration(rapid.IntRange(-1, 15).Draw(rt, "graceMinutes")) * time.Minute}
		// One bound or the other binds first; commands are ~1.2 KB.
		lim := Limits{MaxCommands: rapid.IntRange(1, 6).Draw(rt, "maxCommands"), MaxBytes: 1 << 20}
		if rapid.Bool().Draw(rt, "bytesBound") {
			lim = Limits{MaxCommands: 1000, MaxBytes: int64(rapid.IntRange(1000, 9000).Draw(rt, "maxBytes"))}
		}
		buf := openBuffer(t, tempDB(t), lim)
		now := t0
		m := NewMonitor(cfg, now)
		w := &windowModel{grace: cfg.Grace, state: StateOffline, since: now, lastHeard: now, leases: map[Item]Lease{}, started: map[Item]time.Time{}}
		var queued []string // actionIds in the model buffer
		var queuedBytes int64
		sizes := map[string]int64{}
		seq := 0

		// Most runs start online with leases, so outages find work to buffer.
		prefix := []string{"connect", "reconcile", "lease", "lease", "lease"}
		if rapid.Bool().Draw(rt, "coldStart") {
			prefix = nil
		}
		ops := []string{"wait", "connect", "reconcile", "disconnect", "ping", "heard", "lease", "release", "buffer", "buffer", "buffer", "buffer", "ack"}
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			op := ""
			if step < len(prefix) {
				op = prefix[step]
			} else {
				op = rapid.SampledFrom(ops).Draw(rt, "op")
			}
			switch op {
			case "wait":
				now = now.Add(time.Duration(rapid.IntRange(0, 90_000).Draw(rt, "ms")) * time.Millisecond)
			case "connect":
				m.Connected(now)
				w.lastHeard = later(w.lastHeard, now)
				if w.state == StateOffline {
					w.state = StateReconciling
				}
			case "reconcile": // the runtime reconciles only once the buffer is empty
				if len(queued) == 0 {
					m.Reconciled(now)
					w.lastHeard = later(w.lastHeard, now)
					if w.state == StateReconciling {
						w.state = StateOnline
					}
				}
			case "disconnect", "ping":
				at := now
				if op == "ping" {
					m.PingTimedOut(now)
					at = w.lastHeard
				} else {
					m.Disconnected(now)
				}
				if w.state != StateOffline {
					w.state, w.since = StateOffline, at
				}
			case "heard":
				if w.state != StateOffline {
					m.Heard(now)
					w.lastHeard = later(w.lastHeard, now)
				}
			case "lease": // a start or renewal acknowledged by the authority
				it := rapid.SampledFrom(propItems).Draw(rt, "item")
				if m.MayStart() {
					l := Lease{Item: it, AgentID: self, SessionEpoch: 3, OwnershipEpoch: 2, LeaseID: "lease-" + it.GroupID + "-" + it.WorkItemID,
						ExpiresAt: now.Add(time.Duration(rapid.IntRange(1, 180).Draw(rt, "leaseSeconds")) * time.Second), Reversible: rapid.Bool().Draw(rt, "reversible")}
					m.SetLease(l)
					w.leases[it] = l
					if _, ok := w.started[it]; !ok {
						w.started[it] = now
					}
				}
			case "release":
				it := rapid.SampledFrom(propItems).Draw(rt, "item")
				m.Release(it)
				delete(w.leases, it)
			case "buffer":
				it := rapid.SampledFrom(propItems).Draw(rt, "item")
				usage := protocol.Usage{Tokens: uint64(rapid.IntRange(0, 1000).Draw(rt, "tokens"))}
				b, err := m.Binding(it, now, usage)
				l, leased := w.leases[it]
				mayBuffer := w.state != StateOnline && leased && !now.Before(w.since) && now.Before(w.end(it))
				if (err == nil) != mayBuffer {
					rt.Fatalf("Binding(%v) at %s: err %v, model allows %v (state %s since %s)", it, now, err, mayBuffer, w.state, w.since)
				}
				if err != nil {
					continue
				}
				hist := LeaseHistory{LeaseID: l.LeaseID, AgentID: self, SessionEpoch: 3, WorkItemID: it.WorkItemID, OwnershipEpoch: 2,
					StartedAt: w.started[it], ExpiresAt: l.ExpiresAt, CurrentOwner: self, CurrentOwnershipEpoch: 2, Grace: cfg.Grace}
				if err := CheckBuffered(b, hist, now); err != nil {
					rt.Fatalf("the authority refuses the worker's own binding %+v: %v", b, err)
				}
				seq++
				raw, err := SignBuffered(command(t, protocol.CmdLeaseRenew, b, seq), b, key)
				if err != nil {
					rt.Fatal(err)
				}
				size := int64(len(raw))
				fits := len(queued)+1 <= lim.MaxCommands && queuedBytes+size <= lim.MaxBytes
				e, err := buf.Append(raw)
				switch {
				case size > lim.MaxBytes:
					if !errors.Is(err, ErrTooLarge) {
						rt.Fatalf("append of %d bytes over a %d-byte buffer: %v", size, lim.MaxBytes, err)
					}
				case fits && err != nil, !fits && !errors.Is(err, ErrFull):
					rt.Fatalf("append with %d/%d buffered (%d+%d/%d bytes): %v", len(queued), lim.MaxCommands, queuedBytes, size, lim.MaxBytes, err)
				case !fits:
					fullSeen++
				default:
					queued, queuedBytes = append(queued, e.ActionID), queuedBytes+size
					sizes[e.ActionID] = size
				}
			case "ack":
				es := pending(t, buf)
				if len(es) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(es)-1).Draw(rt, "ackIndex")
				if err := buf.Remove(es[i].ID); err != nil {
					rt.Fatal(err)
				}
				queuedBytes -= sizes[es[i].ActionID]
				queued = slices.Delete(queued, i, i+1)
			}
			checkInvariants(rt, m, w, buf, lim, now, queued)
			for _, it := range propItems {
				if l, ok := w.leases[it]; ok && w.state != StateOnline && !now.Before(l.ExpiresAt) && m.MayRun(it, now) {
					graceRuns++
				}
			}
		}
	}
	// rapid draws a new seed each run: go on (a bounded number of rounds)
	// until the generator has reached both edges at least once.
	for round := 0; round < 5 && (round == 0 || fullSeen == 0 || graceRuns == 0); round++ {
		rapid.Check(t, prop)
	}
}

func checkInvariants(rt *rapid.T, m *Monitor, w *windowModel, buf *Buffer, lim Limits, now time.Time, queued []string) {
	if m.State() != w.state {
		rt.Fatalf("state %s, model %s", m.State(), w.state)
	}
	if m.MayStart() && m.State() != StateOnline {
		rt.Fatalf("MayStart while %s", m.State())
	}
	if m.AllowOperation(Irreversible|ExternallyVisible|HighRisk) != (w.state == StateOnline) || !m.AllowOperation(None) {
		rt.Fatalf("AllowOperation wrong while %s", m.State())
	}
	for _, it := range propItems {
		end := w.end(it)
		if got := m.MayRun(it, now); got != now.Before(end) {
			rt.Fatalf("MayRun(%v) at %s = %v; model ends at %s (state %s)", it, now, got, end, w.state)
		}
		if l, ok := w.leases[it]; ok && m.MayRun(it, now) && !now.Before(l.ExpiresAt.Add(MaxGrace)) {
			rt.Fatalf("MayRun(%v) past the lease expiry plus MaxGrace", it)
		}
	}
	n, size, err := buf.Len()
	if err != nil || n > lim.MaxCommands || size > lim.MaxBytes {
		rt.Fatalf("buffer %d commands, %d bytes over %+v (%v)", n, size, lim, err)
	}
	es, err := buf.Pending()
	if err != nil {
		rt.Fatal(err)
	}
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = e.ActionID
		if i > 0 && e.ID <= es[i-1].ID {
			rt.Fatalf("pending out of order at %d", i)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(queued) || n != len(queued) {
		rt.Fatalf("pending %v (Len %d), model %v", got, n, queued)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
