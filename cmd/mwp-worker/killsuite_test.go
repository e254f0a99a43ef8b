package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/natstest"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// envInt is an integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return n
}

// chain is one client's sequence of commands: a Mission and its
// coordinator, then WorkItems one after another, each given a child
// Mission (one Mission per chain: mission.create is rate-limited per
// human, create_child is not).
type chain struct {
	id      int
	step    int    // next step: 0 create, 1 assign, then 2 authorize and 3 create_child per item
	item    int    // current WorkItem
	pending []byte // a command sent without an answer, sent again first
	acked   []ackedCmd
}

type ackedCmd struct {
	raw     []byte
	receipt *protocol.Receipt
}

func (c *chain) groupID() string { return fmt.Sprintf("grp-%d", c.id) }

func (c *chain) itemID(n int) string { return fmt.Sprintf("wi-%d", n) }

func (c *chain) childGroup(n int) string { return fmt.Sprintf("grp-%d-c%d", c.id, n) }

// next builds the chain's next command.
func (c *chain) next(t *testing.T, hk, ck protocol.PrivateKey) []byte {
	alice := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	coord := protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}
	one := protocol.Uint64(1)
	g, m := c.groupID(), fmt.Sprintf("mis-%d", c.id)
	cenv := protocol.Envelope{GroupID: g, SessionEpoch: one, MembershipEpoch: one, CoordinatorEpoch: one}
	var raw []byte
	var err error
	now := time.Now()
	switch c.step {
	case 0:
		_, raw, err = protocol.BuildCommand(alice, hk, protocol.CmdMissionCreate, protocol.Envelope{GroupID: g},
			&protocol.CreateMissionPayload{MissionID: m, Title: "kill suite", Objective: "survive", PriorityClass: protocol.PriorityNormal}, now)
	case 1:
		_, raw, err = protocol.BuildCommand(alice, hk, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: g, MembershipEpoch: one},
			&protocol.AssignCoordinatorPayload{MissionID: m, AgentID: "coord", LeaseDurationMs: uint64(time.Hour.Milliseconds())}, now)
	case 2:
		_, raw, err = protocol.BuildCommand(coord, ck, protocol.CmdWorkAuthorize, cenv,
			&protocol.AuthorizeWorkPayload{WorkItemID: c.itemID(c.item), MissionID: m, Contract: demoContract(c.itemID(c.item), now)}, now)
	case 3:
		_, raw, err = protocol.BuildCommand(coord, ck, protocol.CmdMissionCreateChild, cenv,
			&protocol.CreateChildMissionPayload{MissionID: m, ParentWorkItemID: c.itemID(c.item), ChildMissionID: fmt.Sprintf("%s-c%d", m, c.item),
				ChildGroupID: c.childGroup(c.item), Title: "child", Objective: "o", OnChildFailure: protocol.ChildFailureFail}, now)
	}
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func (c *chain) advance() {
	if c.step++; c.step == 4 {
		c.step, c.item = 2, c.item+1
	}
}

// run sends the chain's commands until ctx ends (the authority is being
// killed): a command without an answer stays pending.
func (c *chain) run(ctx context.Context, t *testing.T, cl *client.Client, hk, ck protocol.PrivateKey, acked *atomic.Int64, errs chan<- error) {
	for ctx.Err() == nil {
		raw := c.pending
		if raw == nil {
			raw = c.next(t, hk, ck)
		}
		c.pending = raw
		r, err := cl.Send(ctx, raw)
		if err != nil {
			if ctx.Err() != nil || protocol.CodeOf(err) == "" {
				return // killed under it: unanswered
			}
			errs <- fmt.Errorf("chain %d step %d of %s: %w", c.id, c.step, c.groupID(), err)
			return
		}
		c.acked = append(c.acked, ackedCmd{raw: raw, receipt: r})
		c.pending = nil
		c.advance()
		acked.Add(1)
	}
}

// Seeded SIGKILLs of `authority serve` under load (MWP_KILLS rounds, 3 by
// default; MWP_KILL_SEED picks the moments): every acknowledged command is
// still there after the restarts (its retry returns the first receipt),
// nothing was applied twice, and every acknowledged child Mission's Group
// exists (a crash between the parent's and the child's transactions is
// the case follow-ups cover).
func TestAuthorityKillSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	authorityKills(t, newAuthorityFixture(t), envInt(t, "MWP_KILLS", 3), envInt(t, "MWP_KILL_SEED", 1), killFault{})
}

// TestAuthorityKillSuiteOnNATS is the kill suite with the log in a stream
// of three NATS servers (--store, replicas 3), two kills by default.
func TestAuthorityKillSuiteOnNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, starts three NATS servers")
	}
	f := newAuthorityFixture(t)
	f.onNATS(natstest.Cluster(t, 3), 3)
	authorityKills(t, f, envInt(t, "MWP_KILLS", 2), envInt(t, "MWP_KILL_SEED", 1), killFault{})
	if _, err := os.Stat(filepath.Join(f.data, authoritylite.LogFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the authority wrote %s beside the stream: %v", authoritylite.LogFile, err)
	}
}

// killFault is what a kill suite does at each kill beyond SIGKILL (a power
// loss: powerloss_test.go).
type killFault struct {
	// kill ends the process; nil: SIGKILL.
	kill func(p *proc, rng *rand.Rand)
	// after, when set, runs on the killed process's data directory before
	// it starts again.
	after func(round int, rng *rand.Rand)
}

func (f killFault) end(p *proc, rng *rand.Rand) error {
	if f.kill != nil {
		f.kill(p, rng)
		return nil
	}
	return p.cmd.Process.Kill()
}

// authorityKills is the kill suite on f: kills rounds, moments seeded by
// seed, each kill as fault says.
func authorityKills(t *testing.T, f *authorityFixture, kills, seed int, fault killFault) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	bin, hk, ck, serveArgs := f.bin, f.hk, f.ck, f.serveArgs
	chains := make([]*chain, 4)
	for i := range chains {
		chains[i] = &chain{id: i}
	}
	errs := make(chan error, len(chains))
	var ackedN atomic.Int64

	killed, unanswered := 0, 0
	for killed < kills {
		p := startProc(t, bin, serveArgs...)
		co := f.connect(p)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, c := range chains {
			wg.Add(1)
			go func() { defer wg.Done(); c.run(ctx, t, co.c, hk, ck, &ackedN, errs) }()
		}
		// Kill when a seeded number of further commands were acknowledged.
		target := ackedN.Load() + 20 + int64(rng.IntN(200))
		deadline := time.Now().Add(30 * time.Second)
		for ackedN.Load() < target && time.Now().Before(deadline) && len(errs) == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := fault.end(p, rng); err != nil {
			t.Fatal(err)
		}
		<-p.done
		p.done <- nil
		killed++
		cancel()
		wg.Wait()
		co.stop()
		if fault.after != nil {
			fault.after(killed, rng)
		}
		for _, c := range chains {
			if c.pending != nil {
				unanswered++
			}
		}
		select {
		case err := <-errs:
			t.Fatalf("round %d: %v\n%s", killed, err, p.logs())
		default:
		}
	}

	// Last start: finish what was pending, then check everything.
	p := startProc(t, bin, serveArgs...)
	co := f.connect(p)
	for _, c := range chains {
		for c.step != 2 || c.pending != nil {
			raw := c.pending
			if raw == nil {
				raw = c.next(t, hk, ck)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := co.c.Send(ctx, raw)
			cancel()
			if err != nil {
				t.Fatalf("chain %d after the kills: %v", c.id, err)
			}
			c.acked, c.pending = append(c.acked, ackedCmd{raw: raw, receipt: r}), nil
			c.advance()
		}
	}
	lost, acked := 0, 0
	seen := map[string]bool{}
	duplicated := 0
	for _, c := range chains {
		for _, a := range c.acked {
			acked++
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := co.c.Send(ctx, a.raw)
			cancel()
			if err != nil || !sameEvents(r, a.receipt) {
				lost++
				t.Errorf("acknowledged command lost or changed: %v; receipt %+v, first %+v", err, r, a.receipt)
			}
			for _, e := range a.receipt.Events {
				if seen[e.EventID] {
					duplicated++
				}
				seen[e.EventID] = true
			}
		}
	}
	co.stop()
	_ = p.cmd.Process.Signal(os.Interrupt)
	<-p.done
	p.done <- nil

	// The log itself: every Mission's Group, and its child's, exists once.
	svc := f.openLog()
	defer svc.Close()
	missions, orphans := 0, 0
	for _, c := range chains {
		if _, ok := svc.Mission(c.groupID()); !ok {
			t.Errorf("Group %s is missing", c.groupID())
		}
		for n := 0; n < c.item; n++ {
			missions++
			if _, ok := svc.Mission(c.childGroup(n)); !ok {
				orphans++
				t.Errorf("child Group %s is missing: its parent waits for it forever", c.childGroup(n))
			}
			if w, ok := svc.WorkItem(c.groupID(), c.itemID(n)); !ok || w.State != protocol.WorkBlocked || w.ChildGroupID != c.childGroup(n) {
				t.Errorf("parent item %s of %s: %+v", c.itemID(n), c.groupID(), w)
			}
		}
	}
	if duplicated > 0 {
		t.Errorf("%d events appear in two receipts", duplicated)
	}
	t.Logf("seed %d: %d kills, %d commands acknowledged, %d lost, %d duplicated; %d sent without an answer when killed and resent; %d WorkItems with their child Mission, %d orphaned",
		seed, killed, acked, lost, duplicated, unanswered, missions, orphans)
}

func sameEvents(a, b *protocol.Receipt) bool {
	if a == nil || b == nil || len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if a.Events[i].EventID != b.Events[i].EventID {
			return false
		}
	}
	return true
}
