package group

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestBadPayloadsNeverPanic sends every command type with a payload of the
// wrong type, a typed nil and no payload at all, in a Group with and without
// a Mission: each is a *protocol.Error and nothing changes.
func TestBadPayloadsNeverPanic(t *testing.T) {
	types := append(append([]protocol.CommandType{}, protocol.CoreCommandTypes...), protocol.ExtCommandTypes...)
	payloads := map[string]func(protocol.CommandType) any{
		"wrong-type": func(typ protocol.CommandType) any {
			if typ == protocol.CmdMissionCancel {
				return &protocol.TerminateMissionPayload{MissionID: "mis-a", Reason: "x"}
			}
			return &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "x"}
		},
		"typed-nil": func(typ protocol.CommandType) any {
			switch typ {
			case protocol.CmdMissionCancel:
				return (*protocol.CancelMissionPayload)(nil)
			case protocol.CmdWorkOffer:
				return (*protocol.OfferWorkPayload)(nil)
			}
			return (*protocol.SubmitWorkPayload)(nil)
		},
		"none": func(protocol.CommandType) any { return nil },
	}
	for _, withMission := range []bool{false, true} {
		for name, mk := range payloads {
			for _, typ := range types {
				k := newKit(t)
				if withMission {
					k.to("wi", protocol.WorkActive)
				} else {
					k.g = NewGroup("grp-a", testLimits())
				}
				for _, actor := range []protocol.Actor{owner, agent("coord"), agent("w1"), orgPolicy} {
					in := k.coordIn(typ, mk(typ))
					in.Actor = actor
					before := snapshot(t, k.g)
					out, err := k.apply(in)
					if err == nil {
						t.Fatalf("%s %s by %s: accepted", name, typ, actor.ID)
					}
					if _, ok := err.(*protocol.Error); !ok || len(out.Events) != 0 || snapshot(t, k.g) != before {
						t.Fatalf("%s %s: %T %v changed state or is not a protocol error", name, typ, err, err)
					}
				}
			}
		}
	}
}

// TestZeroGroupUsesDefaults: a Group decoded from a snapshot has no Limits
// and may have nil maps; it still decides with the documented defaults.
func TestZeroGroupUsesDefaults(t *testing.T) {
	g := &Group{GroupID: "grp-z"}
	in := Input{ActionID: "a", GroupID: "grp-z", Type: protocol.CmdMissionCreate, Actor: owner,
		Payload: &protocol.CreateMissionPayload{MissionID: "mis-z", Title: "t", Objective: "o", PriorityClass: protocol.PriorityLow}}
	if _, err := g.Apply(in, t0); err != nil {
		t.Fatal(err)
	}
	if g.Mission == nil || g.Items == nil || g.Proposals == nil {
		t.Fatalf("group %+v", g)
	}
}
