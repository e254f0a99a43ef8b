package queue

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// viewState is what a Group's in-memory view holds after a step.
type viewState struct {
	mis     MissionView
	members map[string]Member
	items   map[string]*Entry
	deps    map[string][]string
}

func viewStateOf(s *Store, id string) viewState {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	return viewState{g.mis, maps.Clone(g.members), maps.Clone(g.items), maps.Clone(g.deps)}
}

// Every event type the view follows, as each case of projectCases leaves
// it: the projection Apply maintained event by event (stored bytes and the
// in-memory view) is the one Rebuild recomputes from the inbox, and the one
// Open loads back. Replay decodes payloads differently from Apply (one pass
// with the envelope, narrower types): this holds them to the same result,
// a payload Apply could not interpret included.
func TestRebuildEqualsApplyPerEventType(t *testing.T) {
	covered := map[protocol.EventType]bool{}
	for _, tc := range append(projectCases(), replayCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			st := newStream("g")
			if tc.setup != nil {
				tc.setup(st)
			}
			tc.event(st)
			covered[st.evs[len(st.evs)-1].Event.Type] = true

			dir := t.TempDir()
			s := openTest(t, dir, Options{NoSync: true, NoSocket: true})
			for i, in := range st.evs {
				res := mustApply(t, s, in)
				if i == len(st.evs)-1 && tc.wantErr == "" && len(res.Problems) > 0 {
					t.Fatalf("the case's event was not interpretable: %v", res.Problems[0].Err)
				}
			}
			wantBytes, wantView := dumpProjection(t, s.db, "g"), viewStateOf(s, "g")
			if err := s.Rebuild(); err != nil {
				t.Fatal(err)
			}
			if got := dumpProjection(t, s.db, "g"); got != wantBytes {
				t.Errorf("rebuilt projection:\n%s\nwant (applied):\n%s", got, wantBytes)
			}
			if got := viewStateOf(s, "g"); !reflect.DeepEqual(got, wantView) {
				t.Errorf("rebuilt view:\n%+v\nwant (applied):\n%+v", got, wantView)
			}
			// Open decodes the stored entries (an empty list then reads
			// back as empty, not nil): the same view as JSON.
			closeChecked(t, s)
			s = openTest(t, dir, Options{NoSync: true, NoSocket: true})
			if got, want := viewJSON(t, viewStateOf(s, "g")), viewJSON(t, wantView); got != want {
				t.Errorf("loaded view:\n%s\nwant (applied):\n%s", got, want)
			}
		})
	}
	var missing []protocol.EventType
	for typ := range group.Events {
		if projected(typ) && !covered[typ] {
			missing = append(missing, typ)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("no case of projectCases ends with these projected event types: %v", missing)
	}
}

func viewJSON(t *testing.T, v viewState) string {
	t.Helper()
	b, err := json.Marshal(struct {
		M MissionView
		P map[string]Member
		I map[string]*Entry
		D map[string][]string
	}{v.mis, v.members, v.items, v.deps})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replayCases cover the projected event types that no case of
// projectCases ends with; TestRebuildEqualsApplyPerEventType needs no
// check of their own.
func replayCases() []projectCase {
	mis := func(st protocol.MissionState) group.MissionRef {
		return group.MissionRef{MissionID: "mis-g", State: st}
	}
	coord := &protocol.CoordinatorLease{AgentID: "coord-1", CoordinatorEpoch: 2, LeaseExpiresAt: protocol.NewTime(t0.Add(time.Hour))}
	active := func(s *stream) {
		s.missionCreated()
		s.authorized("wi-1", testContract(1, protocol.UrgencyHigh, false))
		s.offered("wi-1", nil, self, "worker-2")
		s.accepted("wi-1", self, 1, 1)
		s.started("wi-1", self, 1, "lease-1")
	}
	missionEvent := func(typ protocol.EventType, p any) func(*stream) {
		return func(s *stream) { s.add(typ, protocol.AggregateMission, "mis-g", "coord-1", p) }
	}
	return []projectCase{
		{name: "mission.coordinator.assigned", setup: active,
			event: missionEvent(protocol.EvtMissionCoordinatorAssigned, group.CoordinatorAssigned{MissionRef: mis(protocol.MissionActive), Coordinator: coord})},
		{name: "mission.coordinator.renewed", setup: active,
			event: missionEvent(protocol.EvtMissionCoordinatorRenewed, group.CoordinatorRenewed{MissionRef: mis(protocol.MissionActive), Coordinator: coord})},
		{name: "mission.submitted_for_approval", setup: active,
			event: missionEvent(protocol.EvtMissionSubmittedForApproval, group.SubmittedForApproval{MissionRef: mis(protocol.MissionAwaitingApproval), Summary: "s", Evidence: []protocol.Evidence{}})},
		{name: "mission.approved", setup: active,
			event: missionEvent(protocol.EvtMissionApproved, group.MissionApproved{MissionRef: mis(protocol.MissionApproved), ApprovalID: "apr-1", Approver: &protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"}})},
		{name: "mission.changes_requested", setup: active,
			event: missionEvent(protocol.EvtMissionChangesRequested, group.ChangesRequested{MissionRef: mis(protocol.MissionActive), Changes: []string{"more"}})},
		{name: "mission.follow_up.created", setup: active,
			event: missionEvent(protocol.EvtMissionFollowUpCreated, group.FollowUpCreated{MissionRef: mis(protocol.MissionActive), FollowUpOf: "mis-0"})},
		{name: "mission.child.created", setup: active,
			event: missionEvent(protocol.EvtMissionChildCreated, group.ChildCreated{MissionRef: mis(protocol.MissionActive),
				Child: &group.ChildLink{ParentWorkItemID: "wi-1", ChildMissionID: "mis-c", ChildGroupID: "grp-c", Title: "t", Objective: "o", OnChildFailure: protocol.ChildFailureBlock}})},
		{name: "membership.changed", setup: active,
			event: func(s *stream) { s.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive) }},
		{name: "membership.delegation.granted",
			setup: func(s *stream) {
				active(s)
				s.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
			},
			event: func(s *stream) { s.member(protocol.EvtMembershipDelegationGranted, self, 2, protocol.MembershipActive) }},
		{name: "membership.ended",
			setup: func(s *stream) {
				active(s)
				s.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
			},
			event: func(s *stream) { s.member(protocol.EvtMembershipEnded, self, 2, protocol.MembershipEnded) }},
		{name: "context_published for a WorkItem", setup: active,
			event: func(s *stream) { s.contextEvent("ctx-wi-1", "wi-1", 1, nil) }},
		{name: "context_published for the Mission", setup: active,
			event: func(s *stream) { s.contextEvent("ctx-mis", "", 1, nil) }},
	}
}
