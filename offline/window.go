package offline

import (
	"errors"
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Grace bounds (spec 11.5: "a bounded lease grace period"). The spec names no
// figure; one authority-lite lease term is the default, and no configuration
// can stretch the grace past MaxGrace. The authority applies the same clamp
// (CheckBuffered), so a worker configured above it only loses work.
const (
	DefaultGrace = 2 * time.Minute
	MaxGrace     = 10 * time.Minute
)

// ClampGrace turns a configured grace into the effective one: 0 means
// DefaultGrace, a negative value means none, and nothing exceeds MaxGrace.
func ClampGrace(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultGrace
	case d < 0:
		return 0
	case d > MaxGrace:
		return MaxGrace
	}
	return d
}

// GraceDeadline is the last instant (exclusive) at which work under a lease
// that expires at expiresAt may run after losing the authority at
// disconnectedAt. A lease already expired at the disconnect gets no grace:
// the work was not running under a valid lease when the authority vanished.
func GraceDeadline(expiresAt, disconnectedAt time.Time, grace time.Duration) time.Time {
	if !disconnectedAt.Before(expiresAt) {
		return expiresAt
	}
	return expiresAt.Add(ClampGrace(grace))
}

// Config tunes a Monitor.
type Config struct {
	// Grace is how long reversible work may run past its lease expiry while
	// offline; see ClampGrace for 0, negative and over-long values.
	Grace time.Duration
}

// State is the connectivity state of a worker as the offline rules see it.
type State int

// The three states. Reconciling is connected but with buffered commands not
// yet settled: spec 11.5 wants reconciliation before submission or further
// side effects, so it is still treated as offline except for connectivity.
const (
	StateOffline State = iota
	StateReconciling
	StateOnline
)

func (s State) String() string {
	switch s {
	case StateOffline:
		return "offline"
	case StateReconciling:
		return "reconciling"
	case StateOnline:
		return "online"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Item names one WorkItem; ids are unique only inside a Group.
type Item struct {
	GroupID    string
	WorkItemID string
}

// Lease is what the worker knows of one active item's execution lease
// (docs/wire.md "Leases"): the last grant or renewal the authority acknowledged.
type Lease struct {
	Item
	AgentID        string
	SessionEpoch   uint64 // the session the lease was granted under
	OwnershipEpoch uint64
	LeaseID        string
	ExpiresAt      time.Time
	// Reversible says the work can be discarded without effect outside the
	// worker; only such work may use the grace period.
	Reversible bool
}

// Errors of Monitor.Binding.
var (
	ErrOnline       = errors.New("offline: the authority is reachable; send, do not buffer")
	ErrUnknownItem  = errors.New("offline: no active lease for the item")
	ErrGraceExpired = errors.New("offline: the item's grace deadline has passed")
)

// Monitor decides, from connectivity inputs, leases and the time passed in,
// what a worker may do while the authority is unreachable (spec 11.5). It is
// pure: it never reads a clock or does I/O, and is not safe for concurrent
// use (one goroutine of the runtime owns it).
type Monitor struct {
	cfg       Config
	state     State
	since     time.Time // disconnectedAt while Offline or Reconciling
	lastHeard time.Time
	leases    map[Item]Lease
}

// NewMonitor returns a Monitor that is offline since offlineSince: a process
// starts without a session. A restarted worker that knows when it really
// lost the authority passes that time.
func NewMonitor(cfg Config, offlineSince time.Time) *Monitor {
	return &Monitor{cfg: cfg, state: StateOffline, since: offlineSince, lastHeard: offlineSince, leases: make(map[Item]Lease)}
}

// Connected records an authenticated session at now. Buffered commands
// (even from before a restart) must be reconciled first: the state becomes
// Reconciling until Reconciled is called.
func (m *Monitor) Connected(now time.Time) {
	m.heard(now)
	if m.state == StateOffline {
		m.state = StateReconciling
	}
}

// Reconciled records that the buffer is empty and every buffered command
// settled; the worker is fully online again.
func (m *Monitor) Reconciled(now time.Time) {
	m.heard(now)
	if m.state == StateReconciling {
		m.state = StateOnline
		m.since = time.Time{}
	}
}

// Disconnected records a closed connection at now. A second disconnect while
// already offline keeps the first time.
func (m *Monitor) Disconnected(now time.Time) { m.goOffline(now) }

// Heard records any frame from the authority (a PING reply, an EVENT, an
// ACK) at now.
func (m *Monitor) Heard(now time.Time) { m.heard(now) }

// PingTimedOut records that a PING went unanswered past its timeout. The
// authority has been unreachable since it was last heard from, not since the
// timer fired: work after that moment was never confirmed.
func (m *Monitor) PingTimedOut(now time.Time) {
	at := m.lastHeard
	if at.IsZero() || at.After(now) {
		at = now
	}
	m.goOffline(at)
}

func (m *Monitor) heard(now time.Time) {
	if now.After(m.lastHeard) {
		m.lastHeard = now
	}
}

func (m *Monitor) goOffline(at time.Time) {
	if m.state == StateOffline {
		return
	}
	m.state = StateOffline
	m.since = at
}

// SetLease records the current lease of an active item (after work.started
// or an acknowledged renewal), replacing any earlier one.
func (m *Monitor) SetLease(l Lease) { m.leases[l.Item] = l }

// Release forgets an item that is no longer active in a slot.
func (m *Monitor) Release(it Item) { delete(m.leases, it) }

// LeaseOf returns the lease recorded for it.
func (m *Monitor) LeaseOf(it Item) (Lease, bool) {
	l, ok := m.leases[it]
	return l, ok
}

// State returns the connectivity state.
func (m *Monitor) State() State { return m.state }

// Offline reports whether the authority is unreachable.
func (m *Monitor) Offline() bool { return m.state == StateOffline }

// DisconnectedAt returns when the authority was lost, while offline or
// reconciling.
func (m *Monitor) DisconnectedAt() (time.Time, bool) {
	if m.state == StateOnline {
		return time.Time{}, false
	}
	return m.since, true
}

// GraceDeadline returns the item's grace deadline while offline or
// reconciling: its lease expiry plus the configured grace, or the expiry
// itself when the lease had already run out at the disconnect or the work
// is not reversible.
func (m *Monitor) GraceDeadline(it Item) (time.Time, bool) {
	l, ok := m.leases[it]
	if !ok || m.state == StateOnline {
		return time.Time{}, false
	}
	return m.deadline(l), true
}

// deadline is the end of offline running for l: reversible work gets the
// grace period, other work stops at its lease expiry.
func (m *Monitor) deadline(l Lease) time.Time {
	if !l.Reversible {
		return l.ExpiresAt
	}
	return GraceDeadline(l.ExpiresAt, m.since, m.cfg.Grace)
}

// MayStart reports whether a new WorkItem may start: only when fully online
// (never offline, and not before buffered commands are reconciled).
func (m *Monitor) MayStart() bool { return m.state == StateOnline }

// MayRun reports whether the item's already-active work may keep running at
// now. Online it runs under its lease. Otherwise reversible work runs until
// its grace deadline and other work only until its lease expiry; past that
// it must pause at its next safe point.
func (m *Monitor) MayRun(it Item, now time.Time) bool {
	l, ok := m.leases[it]
	if !ok {
		return false
	}
	if m.state == StateOnline {
		return now.Before(l.ExpiresAt)
	}
	return now.Before(m.deadline(l))
}

// AllowOperation reports whether an operation of risk r may run now: any
// high-risk, irreversible or externally visible operation needs a fully
// online worker (spec 11.5); reversible local work is governed by MayRun.
func (m *Monitor) AllowOperation(r Risk) bool {
	return r == None || m.state == StateOnline
}

// Binding builds the offline binding for a command about item it buffered at
// bufferedAt, carrying usage as its six-dimension delta. It works while
// reconciling too, so new commands queue behind the buffered ones in order.
// It refuses when online (send instead), for an item without a lease, before
// the disconnect, and at or after the item's deadline (the authority would
// reject it; ask for a safe point before the deadline instead). Times are
// at wire (millisecond) precision.
func (m *Monitor) Binding(it Item, bufferedAt time.Time, usage protocol.Usage) (protocol.OfflineBinding, error) {
	if m.state == StateOnline {
		return protocol.OfflineBinding{}, ErrOnline
	}
	l, ok := m.leases[it]
	if !ok {
		return protocol.OfflineBinding{}, fmt.Errorf("%w: %s/%s", ErrUnknownItem, it.GroupID, it.WorkItemID)
	}
	deadline, since := protocol.NewTime(m.deadline(l)), protocol.NewTime(m.since)
	at := protocol.NewTime(bufferedAt)
	if at.Before(since.Time) {
		return protocol.OfflineBinding{}, fmt.Errorf("offline: %s/%s buffered at %s, before the disconnect at %s", it.GroupID, it.WorkItemID, at, since)
	}
	if !at.Before(deadline.Time) {
		return protocol.OfflineBinding{}, fmt.Errorf("%w: %s/%s at %s (deadline %s)", ErrGraceExpired, it.GroupID, it.WorkItemID, at, deadline)
	}
	return protocol.OfflineBinding{
		AgentID: l.AgentID, GroupID: it.GroupID, WorkItemID: it.WorkItemID,
		OriginalSessionEpoch: l.SessionEpoch, OwnershipEpoch: l.OwnershipEpoch,
		HistoricalLeaseID: l.LeaseID, DisconnectedAt: since,
		BufferedAt: at, GraceDeadline: deadline,
		HistoricalLeaseExpiresAt: protocol.NewTime(l.ExpiresAt), UsageDelta: usage,
	}, nil
}
