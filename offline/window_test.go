package offline

import (
	"errors"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestClampGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want time.Duration }{
		{0, DefaultGrace}, {-time.Second, 0}, {time.Minute, time.Minute},
		{MaxGrace, MaxGrace}, {MaxGrace + time.Millisecond, MaxGrace}, {24 * time.Hour, MaxGrace},
	} {
		if got := ClampGrace(tc.in); got != tc.want {
			t.Errorf("ClampGrace(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestGraceDeadline(t *testing.T) {
	t.Parallel()
	exp := at(2 * time.Minute)
	for _, tc := range []struct {
		name  string
		disc  time.Time
		grace time.Duration
		want  time.Time
	}{
		{"disconnect before expiry gets the grace", t0, time.Minute, exp.Add(time.Minute)},
		{"default grace", t0, 0, exp.Add(DefaultGrace)},
		{"grace clamped to MaxGrace", t0, time.Hour, exp.Add(MaxGrace)},
		{"no grace configured", t0, -1, exp},
		{"disconnect at expiry gets none", exp, time.Minute, exp},
		{"disconnect after expiry gets none", exp.Add(time.Second), time.Minute, exp},
	} {
		if got := GraceDeadline(exp, tc.disc, tc.grace); !got.Equal(tc.want) {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// step is one input to a Monitor in a scenario.
type step func(m *Monitor)

func connected(d time.Duration) step    { return func(m *Monitor) { m.Connected(at(d)) } }
func reconciled(d time.Duration) step   { return func(m *Monitor) { m.Reconciled(at(d)) } }
func disconnected(d time.Duration) step { return func(m *Monitor) { m.Disconnected(at(d)) } }
func heard(d time.Duration) step        { return func(m *Monitor) { m.Heard(at(d)) } }
func pingTimeout(d time.Duration) step  { return func(m *Monitor) { m.PingTimedOut(at(d)) } }
func setLease(l Lease) step             { return func(m *Monitor) { m.SetLease(l) } }

// online is the common prefix: connected at -10m, reconciled, lease set.
func online(l Lease) []step {
	return []step{connected(-10 * time.Minute), reconciled(-10 * time.Minute), setLease(l)}
}

func TestMonitorStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		steps []step
		state State
		since time.Duration // expected disconnectedAt when not online
	}{
		{"a new monitor is offline since its start", nil, StateOffline, -time.Hour},
		{"connecting reconciles first", []step{connected(0)}, StateReconciling, -time.Hour},
		{"reconciled is online", []step{connected(0), reconciled(time.Second)}, StateOnline, 0},
		{"reconciled without a connection changes nothing", []step{reconciled(0)}, StateOffline, -time.Hour},
		{"disconnect from online", []step{connected(0), reconciled(0), disconnected(time.Minute)}, StateOffline, time.Minute},
		{"a second disconnect keeps the first time", []step{connected(0), reconciled(0), disconnected(time.Minute), disconnected(2 * time.Minute)}, StateOffline, time.Minute},
		{"disconnect while reconciling starts a new offline period",
			[]step{connected(0), disconnected(time.Minute)}, StateOffline, time.Minute},
		{"ping timeout dates the loss at the last frame heard",
			[]step{connected(0), reconciled(0), heard(30 * time.Second), pingTimeout(time.Minute)}, StateOffline, 30 * time.Second},
		{"heard out of order never moves lastHeard back",
			[]step{connected(0), reconciled(0), heard(40 * time.Second), heard(10 * time.Second), pingTimeout(time.Minute)}, StateOffline, 40 * time.Second},
		{"ping timeout before anything was heard later", []step{connected(time.Minute), reconciled(time.Minute), pingTimeout(30 * time.Second)}, StateOffline, 30 * time.Second},
		{"connecting again while online stays online", []step{connected(0), reconciled(0), connected(time.Minute)}, StateOnline, 0},
	} {
		m := NewMonitor(Config{}, at(-time.Hour))
		for _, s := range tc.steps {
			s(m)
		}
		if m.State() != tc.state {
			t.Errorf("%s: state %s, want %s", tc.name, m.State(), tc.state)
			continue
		}
		if m.Offline() != (tc.state == StateOffline) || m.MayStart() != (tc.state == StateOnline) {
			t.Errorf("%s: Offline %v MayStart %v in state %s", tc.name, m.Offline(), m.MayStart(), m.State())
		}
		since, ok := m.DisconnectedAt()
		if ok != (tc.state != StateOnline) || (ok && !since.Equal(at(tc.since))) {
			t.Errorf("%s: DisconnectedAt %s %v, want %s", tc.name, since, ok, at(tc.since))
		}
	}
}

func TestMayRun(t *testing.T) {
	t.Parallel()
	rev := testLease() // expires t0+2m
	irr := rev
	irr.Reversible = false
	other := Item{GroupID: "grp-b", WorkItemID: "wi-7"} // same WorkItem id, other Group
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
		item  Item
		now   time.Duration
		want  bool
	}{
		{"unknown item never runs", Config{}, online(rev), other, 0, false},
		{"online under a valid lease", Config{}, online(rev), item, time.Minute, true},
		{"online at lease expiry stops", Config{}, online(rev), item, 2 * time.Minute, false},
		{"offline reversible before expiry", Config{}, append(online(rev), disconnected(0)), item, time.Minute, true},
		{"offline reversible inside the grace", Config{}, append(online(rev), disconnected(0)), item, 2*time.Minute + DefaultGrace - time.Millisecond, true},
		{"offline reversible at the grace deadline stops", Config{}, append(online(rev), disconnected(0)), item, 2*time.Minute + DefaultGrace, false},
		{"configured grace", Config{Grace: 30 * time.Second}, append(online(rev), disconnected(0)), item, 2*time.Minute + 30*time.Second, false},
		{"grace never beyond MaxGrace", Config{Grace: time.Hour}, append(online(rev), disconnected(0)), item, 2*time.Minute + MaxGrace, false},
		{"offline irreversible runs only under its lease", Config{}, append(online(irr), disconnected(0)), item, time.Minute, true},
		{"offline irreversible gets no grace", Config{}, append(online(irr), disconnected(0)), item, 2 * time.Minute, false},
		{"lost after the lease expired: no grace", Config{}, append(online(rev), disconnected(3*time.Minute)), item, 3 * time.Minute, false},
		{"reconciling still counts the grace", Config{}, append(online(rev), disconnected(0), connected(3*time.Minute)), item, 3 * time.Minute, true},
		{"reconciling past the grace stops", Config{}, append(online(rev), disconnected(0), connected(3*time.Minute)), item, 2*time.Minute + DefaultGrace, false},
		{"released item stops", Config{}, append(online(rev), disconnected(0), func(m *Monitor) { m.Release(item) }), item, time.Minute, false},
		{"a renewal while reconciling moves the deadline",
			Config{}, append(online(rev), disconnected(0), connected(3*time.Minute), setLease(Lease{Item: item, AgentID: self, LeaseID: "lease-9", ExpiresAt: at(10 * time.Minute), Reversible: true})),
			item, 11 * time.Minute, true},
	} {
		m := NewMonitor(tc.cfg, at(-time.Hour))
		for _, s := range tc.steps {
			s(m)
		}
		if got := m.MayRun(tc.item, at(tc.now)); got != tc.want {
			dl, _ := m.GraceDeadline(tc.item)
			t.Errorf("%s: MayRun at +%s = %v, want %v (state %s, deadline %s)", tc.name, tc.now, got, tc.want, m.State(), dl)
		}
	}
}

func TestAllowOperation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		steps []step
		risk  Risk
		want  bool
	}{
		{"reversible work offline", []step{disconnected(0)}, None, true},
		{"high risk offline", []step{disconnected(0)}, HighRisk, false},
		{"irreversible offline", []step{disconnected(0)}, Irreversible, false},
		{"externally visible offline", []step{disconnected(0)}, ExternallyVisible, false},
		{"all three offline", []step{disconnected(0)}, HighRisk | Irreversible | ExternallyVisible, false},
		{"irreversible while reconciling", []step{connected(0)}, Irreversible, false},
		{"high risk online", []step{connected(0), reconciled(0)}, HighRisk, true},
		{"externally visible online", []step{connected(0), reconciled(0)}, ExternallyVisible | Irreversible, true},
		{"reversible online", []step{connected(0), reconciled(0)}, None, true},
	} {
		m := NewMonitor(Config{}, at(-time.Hour))
		for _, s := range tc.steps {
			s(m)
		}
		if got := m.AllowOperation(tc.risk); got != tc.want {
			t.Errorf("%s: AllowOperation(%s) = %v, want %v", tc.name, tc.risk, got, tc.want)
		}
	}
}

func TestRiskFrom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		class       protocol.RiskClass
		irr, vis    bool
		want        Risk
		wantOffline bool
	}{
		{protocol.RiskLow, false, false, None, true},
		{protocol.RiskMedium, false, false, None, true},
		{protocol.RiskHigh, false, false, HighRisk, false},
		{protocol.RiskCritical, false, false, HighRisk, false},
		{"bogus", false, false, HighRisk, false},
		{protocol.RiskLow, true, false, Irreversible, false},
		{protocol.RiskLow, false, true, ExternallyVisible, false},
		{protocol.RiskCritical, true, true, HighRisk | Irreversible | ExternallyVisible, false},
	} {
		got := RiskFrom(tc.class, tc.irr, tc.vis)
		if got != tc.want {
			t.Errorf("RiskFrom(%s, %v, %v) = %s, want %s", tc.class, tc.irr, tc.vis, got, tc.want)
		}
		if ok := NewMonitor(Config{}, t0).AllowOperation(got); ok != tc.wantOffline {
			t.Errorf("RiskFrom(%s, %v, %v) allowed offline: %v", tc.class, tc.irr, tc.vis, ok)
		}
	}
	if s := (HighRisk | ExternallyVisible).String(); s != "high-risk|externally-visible" {
		t.Errorf("String = %q", s)
	}
}

func TestMonitorBinding(t *testing.T) {
	t.Parallel()
	usage := protocol.Usage{Money: 0.25, Tokens: 900, ToolCalls: 2, ComputeSeconds: 4.5, WallClockSeconds: 30, SideEffects: 0}
	irr := testLease()
	irr.Reversible = false
	for _, tc := range []struct {
		name  string
		steps []step
		at    time.Duration
		err   error // nil: success
		grace time.Time
	}{
		{"online: send instead", online(testLease()), time.Minute, ErrOnline, time.Time{}},
		{"unknown item", []step{disconnected(0)}, time.Minute, ErrUnknownItem, time.Time{}},
		{"inside the grace", append(online(testLease()), disconnected(10*time.Second)), 3 * time.Minute, nil, at(2*time.Minute + DefaultGrace)},
		{"while reconciling, in order behind the buffer", append(online(testLease()), disconnected(10*time.Second), connected(time.Minute)), 3 * time.Minute, nil, at(2*time.Minute + DefaultGrace)},
		{"at the deadline", append(online(testLease()), disconnected(10*time.Second)), 2*time.Minute + DefaultGrace, ErrGraceExpired, time.Time{}},
		{"irreversible past its lease", append(online(irr), disconnected(10*time.Second)), 2 * time.Minute, ErrGraceExpired, time.Time{}},
		{"irreversible under its lease: deadline is the expiry", append(online(irr), disconnected(10*time.Second)), time.Minute, nil, at(2 * time.Minute)},
	} {
		m := NewMonitor(Config{}, at(-time.Hour))
		for _, s := range tc.steps {
			s(m)
		}
		b, err := m.Binding(item, at(tc.at), usage)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		l := testLease()
		want := protocol.OfflineBinding{
			AgentID: self, GroupID: "grp-a", WorkItemID: "wi-7", OriginalSessionEpoch: l.SessionEpoch, OwnershipEpoch: l.OwnershipEpoch,
			HistoricalLeaseID: l.LeaseID, DisconnectedAt: protocol.NewTime(at(10 * time.Second)), BufferedAt: protocol.NewTime(at(tc.at)),
			GraceDeadline: protocol.NewTime(tc.grace), HistoricalLeaseExpiresAt: protocol.NewTime(l.ExpiresAt), UsageDelta: usage,
		}
		if !sameBinding(b, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, b, want)
		}
		// Whatever the monitor binds, the authority accepts against the
		// same lease and grace.
		if err := CheckBuffered(b, historyOf(l), at(time.Hour)); err != nil {
			t.Errorf("%s: authority refuses the monitor's own binding: %v", tc.name, err)
		}
	}
	m := NewMonitor(Config{}, at(-time.Hour))
	for _, s := range append(online(testLease()), disconnected(time.Minute)) {
		s(m)
	}
	if l, ok := m.LeaseOf(item); !ok || l != testLease() {
		t.Errorf("LeaseOf = %+v, %v", l, ok)
	}
	if _, err := m.Binding(item, at(30*time.Second), usage); err == nil {
		t.Error("a binding buffered before the disconnect was built")
	}
}

// historyOf is the authority's record of l, live and still owned.
func historyOf(l Lease) LeaseHistory {
	return LeaseHistory{
		LeaseID: l.LeaseID, AgentID: l.AgentID, SessionEpoch: l.SessionEpoch, WorkItemID: l.WorkItemID,
		OwnershipEpoch: l.OwnershipEpoch, StartedAt: l.ExpiresAt.Add(-2 * time.Minute), ExpiresAt: l.ExpiresAt,
		CurrentOwner: l.AgentID, CurrentOwnershipEpoch: l.OwnershipEpoch,
	}
}
