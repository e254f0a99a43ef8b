package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

func TestForgetDue(t *testing.T) {
	now := t0
	over := groupHolds{terminal: true}
	for _, tc := range []struct {
		name      string
		h         groupHolds
		seen      time.Time
		seenOK    bool
		at        time.Time
		over, due bool
	}{
		{"mission still active", groupHolds{}, time.Time{}, false, now, false, false},
		{"an item the engine tracks", groupHolds{terminal: true, items: 1}, time.Time{}, false, now, false, false},
		{"an owned item not terminal", groupHolds{terminal: true, owned: 1}, time.Time{}, false, now, false, false},
		{"a command in the offline buffer", groupHolds{terminal: true, offline: 1}, time.Time{}, false, now, false, false},
		{"a notice pending", groupHolds{terminal: true, notices: 1}, time.Time{}, false, now, false, false},
		{"over, first seen: the grace starts", over, time.Time{}, false, now, true, false},
		{"over, within the grace", over, now, true, now.Add(time.Minute - time.Nanosecond), true, false},
		{"over, grace passed", over, now, true, now.Add(time.Minute), true, true},
		{"held again after being over", groupHolds{terminal: true, items: 1}, now, true, now.Add(time.Hour), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, gotOver, gotDue := forgetDue(tc.h, tc.seen, tc.seenOK, tc.at, time.Minute)
			if gotOver != tc.over || gotDue != tc.due {
				t.Fatalf("over %v due %v, want %v %v", gotOver, gotDue, tc.over, tc.due)
			}
		})
	}
}

// A Group whose Mission ended and which holds nothing of the worker is
// forgotten once the grace passed on the worker's clock: its buckets are
// dropped, and a restart does not subscribe it again although the
// authority still lists it.
func TestWorkerForgetsFinishedGroup(t *testing.T) {
	k := newWKit(t)
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	cfg.ForgetGrace = time.Minute
	if err := k.start(cfg).stop(t); err != nil { // enrolled by a first run
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	store := func() interface {
		Forgotten(string) bool
		GroupIDs() []string
	} {
		return tw.w.liveStore()
	}
	k.until("grp-a subscribed", func() bool { return len(store().GroupIDs()) == 1 }, tw)
	tw.w.mu.Lock()
	cps := tw.w.eng.cps
	tw.w.mu.Unlock()
	if _, err := cps.Save(checkpoint.Key{GroupID: "grp-a", WorkItemID: "wi-old", OwnershipEpoch: 1}, t0, checkpoint.Meta{}, []byte("state")); err != nil {
		t.Fatal(err)
	}
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done"})
	k.until("grp-a forgotten after the grace", func() bool {
		k.fc.Advance(20 * time.Second)
		return store().Forgotten("grp-a")
	}, tw)
	if ids := store().GroupIDs(); len(ids) != 0 {
		t.Fatalf("groups after forgetting: %v", ids)
	}
	if _, err := cps.Latest("grp-a", "wi-old"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("checkpoint of the forgotten Group: %v", err)
	}
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
	tw = k.start(cfg) // online: the HELLO answer listing grp-a was taken
	if ids := store().GroupIDs(); len(ids) != 0 || !store().Forgotten("grp-a") {
		t.Fatalf("after a restart: groups %v, forgotten %v", ids, store().Forgotten("grp-a"))
	}
}

// N finished Groups cost the worker and the authority no goroutine and
// the worker's store no bucket: after twelve Missions ended, and their
// Groups were forgotten, the process runs as many goroutines as before
// they existed (give or take the bounded noise of timers), and the store
// knows none of them.
func TestWorkerFinishedGroupsDoNotGrowGoroutines(t *testing.T) {
	const n = 12
	k := newWKit(t)
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	cfg.ForgetGrace = time.Minute
	if err := k.start(cfg).stop(t); err != nil {
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	st := func() *queue.Store { return tw.w.liveStore() }
	k.until("grp-a subscribed", func() bool { return len(st().GroupIDs()) == 1 }, tw)
	before := goruntime.NumGoroutine()
	for i := range n {
		g := fmt.Sprintf("grp-f%02d", i)
		do := func(p *authoritylite.Principal, typ protocol.CommandType, payload any) {
			t.Helper()
			if _, err := p.Do(context.Background(), typ, g, payload); err != nil {
				t.Fatalf("%s %s: %v", g, typ, err)
			}
		}
		mis := "mis-" + g
		do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: mis, Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
		do(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: mis, AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})
		do(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
			Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
		tw.w.AddGroup(g) // as a program that learns its Groups elsewhere does
		tw.w.AddGroup(g) // twice: named once
		do(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: mis, Reason: "done"})
	}
	k.until("every finished Group forgotten", func() bool {
		k.fc.Advance(20 * time.Second)
		for i := range n {
			if !st().Forgotten(fmt.Sprintf("grp-f%02d", i)) {
				return false
			}
		}
		return true
	}, tw)
	if ids := st().GroupIDs(); len(ids) != 1 {
		t.Fatalf("groups in the store: %v, want grp-a only", ids)
	}
	tw.w.mu.Lock()
	added := slices.Clone(tw.w.added)
	tw.w.mu.Unlock()
	if len(added) != 0 {
		t.Fatalf("the worker still names %d forgotten Groups to subscribe: %v", len(added), added)
	}
	k.until("goroutines back to what they were before the Groups", func() bool {
		return goruntime.NumGoroutine() <= before+3
	}, tw)
}

// What the engine keeps per Group and per item follows the active Groups
// and their open items: after n finished Groups are forgotten, and the
// items of the active one ended, its maps hold the active Group's open
// items only, whatever n is.
func TestEngineStateFollowsActiveGroups(t *testing.T) {
	for _, n := range []int{1, 10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := &engine{w: &Worker{}, refused: map[itemKey]refusal{}, clarify: map[itemKey]*clarifyAsk{},
				rejected: map[string]time.Time{}, rejections: map[string]int{}, members: map[string]uint64{}}
			fill := func(g string, items int) {
				e.w.AddGroup(g)
				e.members[g], e.rejections[g], e.rejected[g] = 1, 1, time.Time{}
				for i := range items {
					k := itemKey{g, fmt.Sprintf("wi-%d", i)}
					e.refused[k], e.clarify[k] = refusal{offerID: "off"}, &clarifyAsk{}
				}
			}
			fill("grp-active", 3)
			for i := range n {
				g := fmt.Sprintf("grp-f%d", i)
				fill(g, 5)
				e.forgetState(g)
			}
			e.settled(itemKey{"grp-active", "wi-0"}) // ended while its Group stays active
			if len(e.refused) != 2 || len(e.clarify) != 2 || len(e.members) != 1 || len(e.rejections) != 1 || len(e.rejected) != 1 || len(e.w.added) != 1 {
				t.Fatalf("after %d finished Groups: refused %d, clarify %d, members %d, rejections %d, rejected %d, added %d; want 2 2 1 1 1 1",
					n, len(e.refused), len(e.clarify), len(e.members), len(e.rejections), len(e.rejected), len(e.w.added))
			}
		})
	}
}
