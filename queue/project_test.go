package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// viewOf runs the pure projection over events, as Apply would.
func viewOf(t *testing.T, group string, evs []Incoming) *groupState {
	t.Helper()
	g := newGroupState(group)
	for _, in := range evs {
		ov := newOverlay(g)
		f := factOf(in.Event)
		ch, err := project(ov, &f)
		if err != nil {
			t.Fatalf("setup event %s (%s): %v", in.Event.EventID, in.Event.Type, err)
		}
		ov.record(ch)
		ov.merge()
	}
	return g
}

func snapshotJSON(t *testing.T, g *groupState) string {
	t.Helper()
	b, err := json.Marshal(struct {
		M MissionView
		I map[string]*Entry
		D map[string][]string
	}{g.mis, g.items, g.deps})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// projectCase is one event, after its setup, with what projecting it must
// do to the view.
type projectCase struct {
	name    string
	setup   func(*stream)
	event   func(*stream)
	wantErr protocol.Code
	check   func(t *testing.T, g *groupState)
}

// projectCases are the per-event-type cases of the projection, shared by
// TestProjectPerEventType and TestRebuildEqualsApplyPerEventType.
func projectCases() []projectCase {
	c1 := testContract(1, protocol.UrgencyHigh, false)
	gated := testContract(1, protocol.UrgencyNormal, true)
	c2 := testContract(2, protocol.UrgencyCritical, false)
	queued := func(s *stream) {
		s.missionCreated()
		s.authorized("wi-1", c1)
		s.offered("wi-1", nil, self, "worker-2")
		s.accepted("wi-1", self, 3, 1)
	}
	active := func(s *stream) {
		queued(s)
		s.started("wi-1", self, 3, "lease-1")
	}
	return []projectCase{
		{
			name:  "mission.created sets the Group's mission view",
			event: func(s *stream) { s.missionCreated() },
			check: func(t *testing.T, g *groupState) {
				want := MissionView{MissionID: "mis-g", State: protocol.MissionActive, PriorityClass: protocol.PriorityHigh, Revision: 1, UpdatedSeq: 1, Record: g.mis.Record}
				if g.mis != want || g.mis.Record == nil || g.mis.Record.MissionID != "mis-g" {
					t.Errorf("mission = %+v, want %+v", g.mis, want)
				}
			},
		},
		{
			name: "mission.created's priority class comes from the Mission record",
			event: func(s *stream) {
				s.missionCreatedWith(protocol.PriorityCritical)
			},
			check: func(t *testing.T, g *groupState) {
				if g.mis.PriorityClass != protocol.PriorityCritical || g.mis.MissionID != "mis-g" {
					t.Errorf("mission = %+v, want priority critical", g.mis)
				}
			},
		},
		{
			name:  "work.authorized creates an open item with the contract's scheduling inputs",
			setup: func(s *stream) { s.missionCreated() },
			event: func(s *stream) { s.authorized("wi-1", testContract(1, protocol.UrgencyHigh, true, "wi-0")) },
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkOpen || e.Urgency != protocol.UrgencyHigh || e.ContractRevision != 1 ||
					e.ContractSeq != 2 || !e.ApprovalRequired || e.RiskGatePassed() || e.Revision != 1 ||
					*e.Resources.MemoryMiB != 512 || len(e.Capabilities) != 1 || e.MissionID != "mis-g" {
					t.Errorf("entry = %+v", e)
				}
				if len(e.Dependencies) != 1 || e.Dependencies[0] != (Dependency{WorkItemID: "wi-0", Policy: protocol.DependencyVerified}) || e.DependenciesSatisfied() {
					t.Errorf("dependencies = %+v", e.Dependencies)
				}
				if got := g.deps["wi-0"]; !reflect.DeepEqual(got, []string{"wi-1"}) {
					t.Errorf("dependents index = %v", got)
				}
			},
		},
		{
			name:  "work.offer.created records the offer and its candidates",
			setup: func(s *stream) { s.missionCreated(); s.authorized("wi-1", c1) },
			event: func(s *stream) { s.offered("wi-1", nil, self, "worker-2") },
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkOffered || e.Offer == nil || e.Offer.OfferID != "off-wi-1" ||
					!e.OfferedTo(self) || !e.Concerns(self) || e.Concerns("worker-3") || e.Offer.ExpiresAt.IsZero() {
					t.Errorf("entry = %+v offer %+v", e, e.Offer)
				}
			},
		},
		{
			name: "work.offer.created with a revised contract fences the old owner and resets the approval",
			setup: func(s *stream) {
				s.missionCreated()
				s.authorized("wi-1", gated)
				s.offered("wi-1", nil, self)
				s.accepted("wi-1", self, 1, 1)
				s.approved("wi-1", 1, time.Time{})
				s.failed("wi-1")
			},
			event: func(s *stream) {
				c := testContract(2, protocol.UrgencyLow, true)
				s.offered("wi-1", &c, "worker-2")
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkOffered || e.Owner != "" || e.OwnershipEpoch != 0 || e.ContractRevision != 2 ||
					e.ContractSeq != 7 || e.ApprovedRevision != 0 || e.RiskGatePassed() || e.OfferedTo(self) || e.Urgency != protocol.UrgencyLow {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.offer.accepted grants ownership and enqueues at the event's time",
			setup: func(s *stream) {
				s.missionCreated()
				s.authorized("wi-1", c1)
				s.offered("wi-1", nil, self)
			},
			event: func(s *stream) { s.accepted("wi-1", self, 4, 1) },
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkQueued || e.Owner != self || e.OwnershipEpoch != 4 || e.Offer != nil ||
					!e.EnqueuedAt.Equal(t0.Add(4*time.Second)) || !e.StartDeadline.Equal(t0.Add(2*time.Hour)) {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.offer.accepted without the ownership grant is not interpretable",
			setup: func(s *stream) {
				s.missionCreated()
				s.authorized("wi-1", c1)
				s.offered("wi-1", nil, self)
			},
			event: func(s *stream) {
				s.add(protocol.EvtWorkOfferAccepted, protocol.AggregateWorkItem, "wi-1", self, obj{"workItemId": "wi-1", "state": "queued", "offerId": "off-wi-1"})
			},
			wantErr: protocol.CodeSchemaValidationFailed,
		},
		{
			name:  "work.started records the execution lease",
			setup: queued,
			event: func(s *stream) { s.started("wi-1", self, 3, "lease-9") },
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				want := &Lease{LeaseID: "lease-9", AgentID: self, SessionEpoch: 1, ExpiresAt: protocol.NewTime(t0.Add(10 * time.Minute))}
				if e.State != protocol.WorkActive || !reflect.DeepEqual(e.Lease, want) || e.Attempts != 1 || !e.StartDeadline.IsZero() {
					t.Errorf("entry = %+v lease %+v", e, e.Lease)
				}
			},
		},
		{
			name:  "work.progressed from a lease renewal moves the expiry and keeps the lease's identity",
			setup: active,
			event: func(s *stream) {
				s.renewed("wi-1", t0.Add(30*time.Minute))
			},
			check: func(t *testing.T, g *groupState) {
				want := &Lease{LeaseID: "lease-1", AgentID: self, SessionEpoch: 1, ExpiresAt: protocol.NewTime(t0.Add(30 * time.Minute))}
				if l := g.items["wi-1"].Lease; !reflect.DeepEqual(l, want) {
					t.Errorf("lease = %+v, want %+v", l, want)
				}
			},
		},
		{
			name:  "work.progressed without a lease changes only the revision",
			setup: active,
			event: func(s *stream) {
				s.progressed("wi-1")
			},
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.Lease.LeaseID != "lease-1" || e.Revision != 5 || e.State != protocol.WorkActive {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "work.checkpointed requeues, releases the lease and keeps the checkpoint",
			setup: active,
			event: func(s *stream) {
				s.checkpointed("wi-1", "cp-1")
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				want := &protocol.CheckpointRef{CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("cp-1")), At: protocol.NewTime(t0)}
				if e.State != protocol.WorkQueued || e.Lease != nil || !reflect.DeepEqual(e.Checkpoint, want) ||
					!e.EnqueuedAt.Equal(t0.Add(6*time.Second)) || e.Owner != self {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "a reconciled offline work.checkpointed (state still active) records the checkpoint only",
			setup: active,
			event: func(s *stream) {
				s.add(protocol.EvtWorkCheckpointed, protocol.AggregateWorkItem, "wi-1", self, group.Checkpointed{WorkRef: ref("wi-1", protocol.WorkActive),
					LeaseID: "lease-0", Checkpoint: &protocol.CheckpointRef{CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("cp-1")), At: protocol.NewTime(t0)},
					CheckpointReason: protocol.CheckpointPreempted, Reason: group.ReasonOfflineReconciled})
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkActive || e.Lease == nil || e.Lease.LeaseID != "lease-1" || e.Checkpoint == nil || e.Checkpoint.CheckpointID != "cp-1" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "work.blocked records the required resolution",
			setup: active,
			event: func(s *stream) {
				s.blocked("wi-1", "cp-2", protocol.Resolution{Kind: protocol.ResolutionClarification, Detail: "which API?"})
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.State != protocol.WorkBlocked || e.Lease != nil || e.Blocker == nil || e.Blocker.Kind != protocol.ResolutionClarification || e.Checkpoint.CheckpointID != "cp-2" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.unblocked returns an owned item to its queue",
			setup: func(s *stream) {
				active(s)
				s.blocked("wi-1", "cp-2", protocol.Resolution{Kind: protocol.ResolutionOther, Detail: "d"})
			},
			event: func(s *stream) { s.unblocked("wi-1", false) },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkQueued || e.Blocker != nil || e.Owner != self || !e.EnqueuedAt.Equal(t0.Add(7*time.Second)) {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.unblocked to open, as the authority says, drops the expired ownership",
			setup: func(s *stream) {
				active(s)
				s.blocked("wi-1", "cp-2", protocol.Resolution{Kind: protocol.ResolutionOther, Detail: "d"})
			},
			event: func(s *stream) { s.unblocked("wi-1", true) },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkOpen || e.Owner != "" || !e.EnqueuedAt.IsZero() {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "work.submitted releases the lease",
			setup: active,
			event: func(s *stream) { s.submitted("wi-1") },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkSubmitted || e.Lease != nil {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.result.accepted verifies the item and satisfies its dependents",
			setup: func(s *stream) {
				active(s)
				s.authorized("wi-2", testContract(1, protocol.UrgencyLow, false, "wi-1"))
				s.submitted("wi-1")
			},
			event: func(s *stream) { s.resultAccepted("wi-1") },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkVerified {
					t.Errorf("wi-1 = %+v", e)
				}
				e := g.items["wi-2"]
				if e.Dependencies[0].State != protocol.WorkVerified || !e.DependenciesSatisfied() || e.UpdatedSeq != 8 || e.Revision != 1 {
					t.Errorf("wi-2 = %+v", e)
				}
			},
		},
		{
			name: "work.failed ends ownership but keeps the checkpoint",
			setup: func(s *stream) {
				active(s)
				s.checkpointed("wi-1", "cp-1")
			},
			event: func(s *stream) { s.failed("wi-1") },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkFailed || e.Owner != "" || e.Lease != nil || e.Checkpoint == nil {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "work.cancelled",
			setup: queued,
			event: func(s *stream) { s.cancelled("wi-1") },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkCancelled {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "work.contract.revised inserts a dependency with its current state",
			setup: func(s *stream) {
				queued(s)
				s.authorized("wi-0", c1)
			},
			event: func(s *stream) {
				c := c1
				c.Revision = 2
				c.Dependencies = []protocol.Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyTerminal}}
				s.revised("wi-1", c, c.Dependencies...)
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if e.ContractRevision != 2 || len(e.Dependencies) != 1 || e.Dependencies[0].State != protocol.WorkOpen || e.ContractSeq != 6 {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "work.contract.revised with a full contract replaces the inputs",
			setup: queued,
			event: func(s *stream) {
				s.revised("wi-1", c2)
			},
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.Urgency != protocol.UrgencyCritical || e.ContractSeq != 5 || e.ContractRevision != 2 {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "approval.execution.granted passes the risk gate of that contract revision only",
			setup: func(s *stream) {
				s.missionCreated()
				s.authorized("wi-1", gated)
			},
			event: func(s *stream) {
				s.approved("wi-1", 1, t0.Add(time.Hour))
			},
			check: func(t *testing.T, g *groupState) {
				e := g.items["wi-1"]
				if !e.RiskGatePassed() || e.ApprovedRevision != 1 || e.Revision != 2 || !e.ApprovalExpiresAt.Equal(t0.Add(time.Hour)) {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "mission.cancelled moves the Mission; its unfinished items follow by their own events",
			setup: func(s *stream) {
				active(s)
				s.authorized("wi-2", c1)
			},
			event: func(s *stream) { s.missionClosed(protocol.EvtMissionCancelled, protocol.MissionCancelled) },
			check: func(t *testing.T, g *groupState) {
				if g.mis.State != protocol.MissionCancelled || g.mis.Revision != 2 || g.mis.Record == nil || g.mis.Record.State != protocol.MissionCancelled {
					t.Errorf("mission = %+v", g.mis)
				}
				if g.items["wi-1"].State != protocol.WorkActive || g.items["wi-2"].State != protocol.WorkOpen {
					t.Errorf("items changed by the Mission's event: %+v %+v", g.items["wi-1"], g.items["wi-2"])
				}
			},
		},
		{
			name: "mission.terminated moves the Mission",
			setup: func(s *stream) {
				active(s)
				s.submitted("wi-1")
				s.resultAccepted("wi-1")
			},
			event: func(s *stream) { s.missionClosed(protocol.EvtMissionTerminated, protocol.MissionTerminated) },
			check: func(t *testing.T, g *groupState) {
				if g.items["wi-1"].State != protocol.WorkVerified || g.mis.State != protocol.MissionTerminated {
					t.Errorf("mission %+v item %+v", g.mis, g.items["wi-1"])
				}
			},
		},
		{
			name: "mission.child.created links the parent item, work.blocked blocks it",
			setup: func(s *stream) {
				active(s)
				s.add(protocol.EvtMissionChildCreated, protocol.AggregateMission, "mis-g", "coord-1", group.ChildCreated{
					MissionRef: group.MissionRef{MissionID: "mis-g", State: protocol.MissionActive},
					Child:      &group.ChildLink{ParentWorkItemID: "wi-1", ChildMissionID: "mis-c", ChildGroupID: "grp-c", Title: "t", Objective: "o", OnChildFailure: protocol.ChildFailureBlock}})
			},
			event: func(s *stream) {
				delete(s.leases, "wi-1")
				s.add(protocol.EvtWorkBlocked, protocol.AggregateWorkItem, "wi-1", "coord-1", group.Blocked{WorkRef: ref("wi-1", protocol.WorkBlocked),
					Blocker: &protocol.Resolution{Kind: protocol.ResolutionSubwork, Detail: "child Mission mis-c"}, ChildMissionID: "mis-c", ChildGroupID: "grp-c", Ownership: s.grants["wi-1"]})
			},
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkBlocked || e.ChildMissionID != "mis-c" || e.Lease != nil || e.Owner != self || e.Revision != 5 {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "message.posted changes nothing, whatever it says",
			setup: queued,
			event: func(s *stream) { s.message("approve and start wi-1 now") },
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkQueued || e.UpdatedSeq != 4 {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name:  "group.archived marks the mission view",
			setup: func(s *stream) { s.missionCreated() },
			event: func(s *stream) {
				s.add(protocol.EvtGroupArchived, protocol.AggregateGroup, "g", "org", group.GroupArchived{Snapshot: protocol.SnapshotRef{}, Reason: "done"})
			},
			check: func(t *testing.T, g *groupState) {
				if !g.mis.Archived {
					t.Errorf("mission = %+v", g.mis)
				}
			},
		},
		{
			name:  "an event about an unknown item is not interpretable",
			setup: func(s *stream) { s.missionCreated() },
			event: func(s *stream) {
				s.add(protocol.EvtWorkStarted, protocol.AggregateWorkItem, "wi-404", self, group.Started{WorkRef: ref("wi-404", protocol.WorkActive), Lease: &protocol.ExecutionLease{LeaseID: "l"}})
			},
			wantErr: protocol.CodeProtocolViolation,
		},
		{
			name:  "a payload of the wrong shape is not interpretable",
			setup: func(s *stream) { s.missionCreated() },
			event: func(s *stream) {
				s.add(protocol.EvtWorkAuthorized, protocol.AggregateWorkItem, "wi-1", "c", obj{"workItemId": "wi-1", "contract": "nope"})
			},
			wantErr: protocol.CodeSchemaValidationFailed,
		},
		{
			name:  "an unknown extension event changes nothing",
			setup: queued,
			event: func(s *stream) {
				s.add("ext.acme.billing.invoice_sent", protocol.AggregateWorkItem, "wi-1", "svc", obj{"workItemId": "wi-1", "state": "verified"})
			},
			check: func(t *testing.T, g *groupState) {
				if e := g.items["wi-1"]; e.State != protocol.WorkQueued || e.UpdatedSeq != 4 {
					t.Errorf("entry = %+v", e)
				}
			},
		},
	}
}

func TestProjectPerEventType(t *testing.T) {
	for _, tc := range projectCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := newStream("g")
			if tc.setup != nil {
				tc.setup(s)
			}
			before := viewOf(t, "g", s.evs)
			frozen := snapshotJSON(t, before)
			tc.event(s)
			last := s.evs[len(s.evs)-1]
			f := factOf(last.Event)
			ov := newOverlay(before)
			ch, err := project(ov, &f)
			if again, err2 := project(newOverlay(before), &f); !reflect.DeepEqual(ch, again) || !reflect.DeepEqual(err, err2) {
				t.Errorf("project is not deterministic: %+v / %+v", ch, again)
			}
			if snapshotJSON(t, before) != frozen {
				t.Fatalf("project modified its input view")
			}
			if tc.wantErr != "" {
				var pe *protocol.Error
				if !errors.As(error(err), &pe) || err == nil || pe.Code != tc.wantErr {
					t.Fatalf("err = %v, want code %s", err, tc.wantErr)
				}
				if len(ch.items) != 0 || ch.mission != nil {
					t.Errorf("a failed step changed %+v", ch)
				}
				return
			}
			if err != nil {
				t.Fatalf("project: %v", err)
			}
			ov.record(ch)
			ov.merge()
			tc.check(t, before)
		})
	}
}

func TestDependencySatisfied(t *testing.T) {
	tests := []struct {
		policy protocol.DependencyPolicy
		state  protocol.WorkItemState
		want   bool
	}{
		{protocol.DependencyVerified, protocol.WorkVerified, true},
		{protocol.DependencyVerified, protocol.WorkSubmitted, false},
		{protocol.DependencySubmitted, protocol.WorkSubmitted, true},
		{protocol.DependencySubmitted, protocol.WorkVerified, true},
		{protocol.DependencySubmitted, protocol.WorkActive, false},
		{protocol.DependencyTerminal, protocol.WorkFailed, true},
		{protocol.DependencyTerminal, protocol.WorkCancelled, true},
		{protocol.DependencyTerminal, protocol.WorkQueued, false},
		{protocol.DependencyVerified, "", false},
		{"bogus", protocol.WorkVerified, false},
	}
	for _, tc := range tests {
		if got := (Dependency{Policy: tc.policy, State: tc.state}).Satisfied(); got != tc.want {
			t.Errorf("%s/%s = %v, want %v", tc.policy, tc.state, got, tc.want)
		}
	}
}

// TestSessionReplacementReturnsItemToQueue: authority-lite answers a
// replacement session with work.progressed in state queued (lease
// revoked, ownership kept); the projection must requeue the item so the
// new session starts it again.
func TestSessionReplacementReturnsItemToQueue(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.authorized("wi-1", testContract(1, protocol.UrgencyNormal, false))
	st.offered("wi-1", nil, self)
	st.accepted("wi-1", self, 1, 1)
	st.started("wi-1", self, 1, "lease-1")
	st.add(protocol.EvtWorkProgressed, protocol.AggregateWorkItem, "wi-1", "group-authority", group.Progressed{WorkRef: ref("wi-1", protocol.WorkQueued),
		LeaseID: "lease-1", Reason: group.ReasonSessionReplaced})
	e := viewOf(t, "g", st.evs).items["wi-1"]
	if e.State != protocol.WorkQueued || e.Lease != nil || e.Owner == "" {
		t.Fatalf("after replacement: state %s lease %v owner %q", e.State, e.Lease, e.Owner)
	}
}

// TestLiveOfferKeepsItsExpiry is the regression for the drift between the
// authority's offerExpiresAt and the member the view read (expiresAt):
// an offer decided by the Group state machine reaches the worker's view
// with its expiry, so admission can refuse it once it has passed.
func TestLiveOfferKeepsItsExpiry(t *testing.T) {
	s := newStream("g")
	s.missionCreated()
	c := testContract(1, protocol.UrgencyNormal, false)
	s.authorized("wi-1", c)
	s.offered("wi-1", &c, "w1")
	g := viewOf(t, "g", s.evs)
	e := g.items["wi-1"]
	if e == nil || e.Offer == nil {
		t.Fatalf("no offer in the view: %+v", e)
	}
	if want := protocol.NewTime(t0.Add(time.Hour)); !e.Offer.ExpiresAt.Equal(want.Time) {
		t.Fatalf("offer expires at %v, want %v", e.Offer.ExpiresAt, want)
	}
}

// A step's changed entries are found the same way whether scanned (a few)
// or indexed (more): the latest entry put for an id, in first-put order.
func TestStepperChanged(t *testing.T) {
	for _, n := range []int{1, 2, 8, 9, 10, 30} {
		s := &stepper{v: newGroupState("g")}
		want := map[string]*Entry{}
		var order []string
		for round := range 2 {
			for i := range n {
				if round == 1 && i%2 == 1 {
					continue
				}
				e := &Entry{WorkItemID: fmt.Sprintf("wi-%d", i), Revision: uint64(round)}
				if round == 0 {
					order = append(order, e.WorkItemID)
				}
				s.put(e)
				want[e.WorkItemID] = e
			}
		}
		for id, e := range want {
			if s.changed(id) != e || s.get(id) != e || !s.owned(e) {
				t.Errorf("n=%d: changed(%s) is not the entry last put", n, id)
			}
		}
		if s.changed("wi-missing") != nil {
			t.Errorf("n=%d: an id never put is found", n)
		}
		if len(s.out) != len(order) {
			t.Fatalf("n=%d: %d entries out, want %d", n, len(s.out), len(order))
		}
		for i, e := range s.out {
			if e.WorkItemID != order[i] || e != want[order[i]] {
				t.Errorf("n=%d: out[%d] = %s, want %s", n, i, e.WorkItemID, order[i])
			}
		}
		if indexed := s.byID != nil; indexed != (n > 8) {
			t.Errorf("n=%d: indexed %v", n, indexed)
		}
	}
}
