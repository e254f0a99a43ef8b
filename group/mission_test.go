package group

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

type missionCase struct {
	name   string
	setup  func(k *kit)
	in     func(k *kit) Input
	want   protocol.MissionState
	code   protocol.Code
	events []protocol.EventType
}

// awaiting moves the kit's Mission to awaiting_approval with one verified
// WorkItem.
func awaiting(k *kit) {
	k.to("wi", protocol.WorkVerified)
	k.must(submitForApproval(k))
}

func submitForApproval(k *kit) Input {
	return k.coordIn(protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{
		MissionID: "mis-a", Summary: "done", Evidence: protocol.List[protocol.Evidence]{evidence("mis-a", "ac-1")},
	})
}

func approve(k *kit) Input {
	return k.human(protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: "mis-a", ApprovalID: "apr-m"})
}

func requestChanges(k *kit) Input {
	return k.human(protocol.CmdMissionRequestChanges, &protocol.RequestChangesPayload{MissionID: "mis-a", Changes: protocol.List[string]{"add docs"}})
}

func cancelMission(k *kit) Input {
	return k.human(protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "priorities changed"})
}

func terminateBy(actor protocol.Actor) func(k *kit) Input {
	return func(k *kit) Input {
		in := k.coordIn(protocol.CmdMissionTerminate, &protocol.TerminateMissionPayload{MissionID: "mis-a", Reason: "runaway"})
		in.Actor = actor
		if actor.Kind != protocol.ActorAgent {
			in.SessionEpoch, in.CoordinatorEpoch = nil, nil
		}
		return in
	}
}

func assignBy(actor protocol.Actor) func(k *kit) Input {
	return func(k *kit) Input {
		return k.input(actor, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord-2", LeaseDurationMs: 60000})
	}
}

func renew(k *kit) Input {
	return k.coordIn(protocol.CmdMissionRenewCoordinator, &protocol.RenewCoordinatorPayload{MissionID: "mis-a", LeaseDurationMs: 60000})
}

// TestMissionRows has a positive and a negative case for every row of the
// Mission table in docs/design.md §11; case names start with the row.
func TestMissionRows(t *testing.T) {
	create := func(actor protocol.Actor) func(k *kit) Input {
		return func(k *kit) Input {
			return k.input(actor, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "t", Objective: "o", PriorityClass: protocol.PriorityHigh})
		}
	}
	fresh := func(k *kit) { k.g = NewGroup("grp-a", testLimits()) }
	cases := []missionCase{
		{name: "create/none→active-by-human", setup: fresh, in: create(owner), want: protocol.MissionActive, events: []protocol.EventType{protocol.EvtMissionCreated}},
		{name: "create/by-agent", setup: fresh, in: create(agent("coord")), code: protocol.CodeAuthForbidden},
		{name: "create/by-service", setup: fresh, in: create(orgPolicy), code: protocol.CodeAuthForbidden},
		{name: "create/twice", in: create(owner), code: protocol.CodeInvalidStateTransition},

		{name: "assign_coordinator/by-owner", in: assignBy(owner), want: protocol.MissionActive, events: []protocol.EventType{protocol.EvtMissionCoordinatorAssigned}},
		{name: "assign_coordinator/by-org-policy", in: assignBy(orgPolicy), want: protocol.MissionActive},
		{name: "assign_coordinator/by-other-human", in: assignBy(stranger), code: protocol.CodeAuthForbidden},
		{name: "assign_coordinator/by-coordinator", in: assignBy(agent("coord")), code: protocol.CodeAuthForbidden},
		{name: "assign_coordinator/from-awaiting-approval", setup: awaiting, in: assignBy(owner), code: protocol.CodeInvalidStateTransition},

		{name: "renew_coordinator/current-epoch", in: renew, want: protocol.MissionActive, events: []protocol.EventType{protocol.EvtMissionCoordinatorRenewed}},
		{name: "renew_coordinator/stale-epoch", setup: func(k *kit) { k.assign("coord") }, in: func(k *kit) Input {
			in := renew(k)
			in.CoordinatorEpoch = protocol.Uint64(k.epoch - 1)
			return in
		}, code: protocol.CodeAuthStaleCoordinator},
		{name: "renew_coordinator/lapsed-lease", setup: func(k *kit) { k.advance(10 * time.Hour) }, in: renew, code: protocol.CodeAuthStaleCoordinator},
		{name: "renew_coordinator/other-agent-current-epoch", in: func(k *kit) Input {
			in := renew(k)
			in.Actor = agent("w1")
			return in
		}, code: protocol.CodeAuthForbidden},

		{name: "submit_for_approval/all-verified-or-cancelled", setup: func(k *kit) {
			k.to("wi", protocol.WorkVerified)
			k.to("wi-x", protocol.WorkCancelled)
		}, in: submitForApproval, want: protocol.MissionAwaitingApproval, events: []protocol.EventType{protocol.EvtMissionSubmittedForApproval}},
		{name: "submit_for_approval/unverified-item", setup: func(k *kit) {
			k.to("wi", protocol.WorkVerified)
			k.to("wi-x", protocol.WorkSubmitted)
		}, in: submitForApproval, code: protocol.CodeInvalidStateTransition},
		{name: "submit_for_approval/failed-item", setup: func(k *kit) { k.to("wi", protocol.WorkFailed) }, in: submitForApproval, code: protocol.CodeInvalidStateTransition},

		{name: "approve/awaiting→approved", setup: awaiting, in: approve, want: protocol.MissionApproved, events: []protocol.EventType{protocol.EvtMissionApproved}},
		{name: "approve/from-active", in: approve, code: protocol.CodeInvalidStateTransition},
		{name: "approve/by-other-human", setup: awaiting, in: func(k *kit) Input {
			in := approve(k)
			in.Actor = stranger
			return in
		}, code: protocol.CodeAuthForbidden},
		{name: "approve/by-coordinator", setup: awaiting, in: func(k *kit) Input {
			in := approve(k)
			in.Actor = agent("coord")
			return in
		}, code: protocol.CodeAuthForbidden},

		{name: "request_changes/awaiting→active", setup: awaiting, in: requestChanges, want: protocol.MissionActive, events: []protocol.EventType{protocol.EvtMissionChangesRequested}},
		{name: "request_changes/from-active", in: requestChanges, code: protocol.CodeInvalidStateTransition},

		{name: "cancel/active→cancelled", in: cancelMission, want: protocol.MissionCancelled},
		{name: "cancel/awaiting→cancelled", setup: awaiting, in: cancelMission, want: protocol.MissionCancelled},
		{name: "cancel/from-approved", setup: func(k *kit) { awaiting(k); k.must(approve(k)) }, in: cancelMission, code: protocol.CodeInvalidStateTransition},
		{name: "cancel/by-coordinator", in: func(k *kit) Input {
			in := cancelMission(k)
			in.Actor = agent("coord")
			return in
		}, code: protocol.CodeAuthForbidden},

		{name: "terminate/by-coordinator", in: terminateBy(agent("coord")), want: protocol.MissionTerminated, events: []protocol.EventType{protocol.EvtMissionTerminated}},
		{name: "terminate/by-org-policy-from-awaiting", setup: awaiting, in: terminateBy(orgPolicy), want: protocol.MissionTerminated},
		{name: "terminate/by-owner", in: terminateBy(owner), code: protocol.CodeAuthForbidden},
		{name: "terminate/stale-coordinator", setup: func(k *kit) { k.assign("coord-2") }, in: func(k *kit) Input {
			in := terminateBy(agent("coord"))(k)
			in.CoordinatorEpoch = protocol.Uint64(1)
			return in
		}, code: protocol.CodeAuthStaleCoordinator},
		{name: "terminate/from-cancelled", setup: func(k *kit) { k.must(cancelMission(k)) }, in: terminateBy(orgPolicy), code: protocol.CodeInvalidStateTransition},

		{name: "create_child/active-links-child", setup: at(protocol.WorkOpen), in: func(k *kit) Input { return k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock) },
			want: protocol.MissionActive, events: []protocol.EventType{protocol.EvtMissionChildCreated, protocol.EvtWorkBlocked}},
		{name: "create_child/cyclic-ancestry", setup: at(protocol.WorkOpen), in: func(k *kit) Input { return k.createChildIn("wi", "mis-a", protocol.ChildFailureBlock) },
			code: protocol.CodeInvalidCommand},
		{name: "create_child/from-awaiting-approval", setup: awaiting, in: func(k *kit) Input { return k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock) },
			code: protocol.CodeInvalidStateTransition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			if c.setup != nil {
				c.setup(k)
			}
			in := c.in(k)
			if c.code != "" {
				k.refuse(in, c.code)
				return
			}
			out := k.must(in)
			if c.events != nil {
				wantEvents(t, out, c.events...)
			}
			if got := k.g.Mission.State; got != c.want {
				t.Fatalf("Mission is %s, want %s", got, c.want)
			}
		})
	}
}

// TestMissionFollowUpRow covers mission.create_follow_up: only from a
// terminal predecessor, only by a human.
func TestMissionFollowUpRow(t *testing.T) {
	followUp := func(pred *protocol.Mission, actor protocol.Actor) (Outcome, *Group, error) {
		g := NewGroup("grp-f", testLimits())
		out, err := g.Apply(Input{ActionID: "act-f", GroupID: "grp-f", Type: protocol.CmdMissionCreateFollowUp, Actor: actor, Predecessor: pred,
			Payload: &protocol.CreateFollowUpPayload{MissionID: "mis-f", FollowUpOf: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}}, t0)
		return out, g, err
	}
	for _, s := range []protocol.MissionState{protocol.MissionApproved, protocol.MissionCancelled, protocol.MissionTerminated} {
		t.Run("create_follow_up/from-"+string(s), func(t *testing.T) {
			out, g, err := followUp(&protocol.Mission{MissionID: "mis-a", State: s}, owner)
			if err != nil {
				t.Fatal(err)
			}
			wantEvents(t, out, protocol.EvtMissionCreated, protocol.EvtMissionFollowUpCreated)
			if g.Mission.FollowUpOf != "mis-a" || g.Mission.State != protocol.MissionActive || g.Mission.Owner != owner {
				t.Fatalf("follow-up Mission %+v", g.Mission)
			}
		})
	}
	negatives := []struct {
		name  string
		pred  *protocol.Mission
		actor protocol.Actor
		code  protocol.Code
	}{
		{"create_follow_up/from-active", &protocol.Mission{MissionID: "mis-a", State: protocol.MissionActive}, owner, protocol.CodeInvalidStateTransition},
		{"create_follow_up/from-awaiting-approval", &protocol.Mission{MissionID: "mis-a", State: protocol.MissionAwaitingApproval}, owner, protocol.CodeInvalidStateTransition},
		{"create_follow_up/unknown-predecessor", nil, owner, protocol.CodeInvalidCommand},
		{"create_follow_up/by-agent", &protocol.Mission{MissionID: "mis-a", State: protocol.MissionApproved}, agent("coord"), protocol.CodeAuthForbidden},
	}
	for _, c := range negatives {
		t.Run(c.name, func(t *testing.T) {
			out, g, err := followUp(c.pred, c.actor)
			if protocol.CodeOf(err) != c.code || len(out.Events) != 0 || g.Mission != nil {
				t.Fatalf("err %v (events %d, mission %v), want %s and nothing created", err, len(out.Events), g.Mission, c.code)
			}
		})
	}
}

// TestMissionTerminalPropagation covers the last 10.2 row: a terminal parent
// Mission closes unfinished WorkItems and leaves finished ones alone.
func TestMissionTerminalPropagation(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     func(k *kit) Input
		want   protocol.WorkItemState
		evType protocol.EventType
	}{
		{"parent_terminal/cancel→cancelled", cancelMission, protocol.WorkCancelled, protocol.EvtWorkCancelled},
		{"parent_terminal/terminate→failed", terminateBy(agent("coord")), protocol.WorkFailed, protocol.EvtWorkFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t)
			unfinishedStates := []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive, protocol.WorkBlocked, protocol.WorkSubmitted}
			for _, s := range unfinishedStates {
				k.to("u-"+string(s), s)
			}
			k.to("done", protocol.WorkVerified)
			k.to("gone", protocol.WorkCancelled)
			k.to("fell", protocol.WorkFailed)
			out := k.must(c.in(k))
			if n := len(out.Events); n != 1+len(unfinishedStates) {
				t.Fatalf("%d events, want %d", n, 1+len(unfinishedStates))
			}
			for _, e := range out.Events[1:] {
				if e.Type != c.evType {
					t.Fatalf("propagated event %s, want %s", e.Type, c.evType)
				}
			}
			for _, s := range unfinishedStates {
				k.wantState("u-"+string(s), c.want)
				if w := k.g.Items["u-"+string(s)]; w.Ownership != nil || w.Lease != nil || w.Offer != nil {
					t.Fatalf("%s kept grants after the Mission ended", s)
				}
			}
			k.wantState("done", protocol.WorkVerified)
			k.wantState("gone", protocol.WorkCancelled)
			k.wantState("fell", protocol.WorkFailed)
			// Nothing moves in a terminal Mission.
			k.refuse(k.coordIn(protocol.CmdWorkOffer, k.offerPayload("fell", "of-late", "w1")), protocol.CodeInvalidStateTransition)
		})
	}
	t.Run("parent_terminal/no-unfinished-items", func(t *testing.T) {
		k := newKit(t)
		k.to("done", protocol.WorkVerified)
		wantEvents(t, k.must(cancelMission(k)), protocol.EvtMissionCancelled)
		k.wantState("done", protocol.WorkVerified)
	})
}
