package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// A second process of the same agent opens a newer session: the first one's
// lease is revoked, its slot stops at a safe point and its Run returns
// client.ErrSessionReplaced once the authority ends its stale session.
func TestWorkerSessionReplaced(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(2)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)

	cfg2 := k.workerConfig("w1", t.TempDir(), newStepHandler(2), 1)
	cfg2.Key = cfg.Key
	// The new process knows nothing: the authority's answer corrects its
	// session epoch (0 → 1), and it opens session 2.
	tw2 := k.start(cfg2)
	if st := tw2.w.Status(); st.SessionEpoch != 2 {
		t.Fatalf("second process session %d, want 2", st.SessionEpoch)
	}
	// Session 1's lease is revoked; the new process, the same agent and
	// owner, may already have started the item again under session 2.
	if w := k.item("wi-1"); w.Lease != nil && w.Lease.SessionEpoch != 2 || w.Lease == nil && w.State != protocol.WorkQueued {
		t.Fatalf("replacement did not revoke the lease: %s %v", w.State, w.Lease)
	}
	// The old process learns it on its open connection: the authority ends
	// it with AUTH_STALE_SESSION, no reconnect needed.
	var err error
	k.until("old process stopped", func() bool {
		select {
		case err = <-tw.done:
			tw.done <- err
			return true
		default:
			k.fc.Advance(50 * time.Millisecond)
			return false
		}
	}, nil)
	if !errors.Is(err, client.ErrSessionReplaced) || protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
		t.Fatalf("Run: %v, want ErrSessionReplaced", err)
	}
	if st := tw.w.Status(); len(st.Running) != 0 || st.LastError == "" {
		t.Fatalf("old process status: %+v", st)
	}
	if got := h.history("wi-1"); len(got) != 1 {
		t.Fatalf("runs %v", got)
	}
}

func TestSessionEpochFile(t *testing.T) {
	dir := t.TempDir()
	if e, err := loadEpoch(dir); err != nil || e != 0 {
		t.Fatalf("fresh: %d %v", e, err)
	}
	for _, e := range []uint64{1, 7, 1 << 40} {
		if err := saveEpoch(dir, e); err != nil {
			t.Fatal(err)
		}
		if got, err := loadEpoch(dir); err != nil || got != e {
			t.Fatalf("reopened: %d %v, want %d", got, err, e)
		}
	}
	// No temporary file is left behind; a damaged file is an error, not 0.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files %v", ents)
	}
	if err := os.WriteFile(filepath.Join(dir, SessionFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadEpoch(dir); err == nil {
		t.Fatal("damaged session file accepted")
	}
}

func TestDetailUint(t *testing.T) {
	for _, tc := range []struct {
		v  any
		n  uint64
		ok bool
	}{
		{uint64(3), 3, true}, {int64(3), 3, true}, {3, 3, true}, {3.0, 3, true},
		{-1.0, 0, false}, {2.5, 0, false}, {int64(-2), 0, false}, {"3", 0, false}, {nil, 0, false},
	} {
		n, ok := detailUint(map[string]any{"k": tc.v}, "k")
		if n != tc.n || ok != tc.ok {
			t.Errorf("detailUint(%#v) = %d %v", tc.v, n, ok)
		}
	}
}

// A Group configured before the agent is a member is refused at first
// (GROUP_NOT_FOUND); the worker stays online and subscribes again until the
// membership exists.
func TestWorkerRetriesRejectedGroup(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Groups = []string{"grp-a"}
	tw := k.start(cfg)
	k.member("w1")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("subscribed again and running", func() bool {
		if len(tw.w.Status().Running) == 1 {
			return true
		}
		k.fc.Advance(100 * time.Millisecond)
		return false
	}, tw)
}

// A worker started without any Group learns the Groups it is a member of
// from the authority (docs/wire.md: the HELLO answer, then a GROUPS frame
// on every change), subscribes them without a restart and wins an offer
// in a Group created after it connected.
func TestWorkerLearnsNewGroups(t *testing.T) {
	k := newWKit(t)
	// Enrolled by a first run, made a member of grp-a while stopped: the
	// HELLO answer of the next run names it.
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	if err := k.start(cfg).stop(t); err != nil {
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("wi-1 accepted through the HELLO's Groups", func() bool { return owner(k, "grp-a", "wi-1") == "w1" }, tw)

	// grp-b and its Mission are created while the worker is connected.
	do := func(p *authoritylite.Principal, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(context.Background(), typ, "grp-b", payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Second", Objective: "later", PriorityClass: protocol.PriorityNormal})
	do(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-b", AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())})
	do(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	now := k.ac.Now()
	c := contractFor("wi-b1", protocol.UrgencyNormal, now)
	do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-b1", MissionID: "mis-b", Contract: c})
	do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-b1", OfferID: "off-b1", Contract: c, ExpiresAt: protocol.NewTime(now.Add(time.Hour)),
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"capability-match"}}}}})
	k.until("wi-b1 accepted in the new Group", func() bool { return owner(k, "grp-b", "wi-b1") == "w1" }, tw)
	if st := tw.w.Status(); st.SessionEpoch != 2 {
		t.Fatalf("session %d: the worker reconnected or restarted", st.SessionEpoch)
	}
}

// owner is the WorkItem's owner on the authority, "" when none.
func owner(k *wkit, groupID, id string) string {
	w, ok := k.auth.Service.WorkItem(groupID, id)
	if !ok || w.Ownership == nil {
		return ""
	}
	return w.Ownership.OwnerAgentID
}

func TestRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 2 * time.Second}, {1, 4 * time.Second}, {2, 8 * time.Second}, {4, 32 * time.Second}, {5, time.Minute}, {50, time.Minute}} {
		if got := retryBackoff(time.Second, tc.n); got != tc.want {
			t.Errorf("after %d refusals: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// A Group the worker follows before it is a member is refused at every
// SUBSCRIBE: the worker subscribes again with a growing back-off and says
// so once at WARN, not every two seconds forever; once it is a member the
// subscription goes through and the log says that too.
func TestWorkerRejectedGroupBacksOff(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	tw.w.AddGroup("grp-a") // not a member yet
	refusals := func() int {
		return strings.Count(k.logs.String(), "group rejected") + strings.Count(k.logs.String(), "group still rejected")
	}
	k.until("four refusals", func() bool {
		if refusals() >= 4 {
			return true
		}
		k.fc.Advance(time.Second)
		return false
	}, tw)
	logs := k.logs.String()
	if n := strings.Count(logs, "level=WARN msg=\"group rejected"); n != 1 {
		t.Fatalf("%d WARN lines about the refused Group, want 1:\n%s", n, logs)
	}
	if elapsed := k.fc.Now().Sub(t0); elapsed < 2*time.Second+4*time.Second+8*time.Second {
		t.Fatalf("four refusals within %v: no back-off", elapsed)
	}
	k.member("w1")
	k.until("subscribed", func() bool {
		if strings.Contains(k.logs.String(), "group subscribed") {
			return true
		}
		k.fc.Advance(time.Second)
		return false
	}, tw)
}

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
			e := &engine{w: &Worker{}, refused: map[itemKey]lc.Refusal{}, clarify: map[itemKey]*clarifyAsk{},
				rejected: map[string]time.Time{}, rejections: map[string]int{}, members: map[string]uint64{}}
			fill := func(g string, items int) {
				e.w.AddGroup(g)
				e.members[g], e.rejections[g], e.rejected[g] = 1, 1, time.Time{}
				for i := range items {
					k := itemKey{g, fmt.Sprintf("wi-%d", i)}
					e.refused[k], e.clarify[k] = lc.Refusal{OfferID: "off"}, &clarifyAsk{}
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
