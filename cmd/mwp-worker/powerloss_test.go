package main

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/queue"
)

// TestPowerLossSuite is the two kill suites with the power lost at every
// kill (MWP_POWERLOSS_KILLS kills each, default 3; MWP_KILL_SEED). The
// binary is built with the powerloss failpoint, which records the last
// commit of each bbolt file that returned; before each restart the killed
// process's file loses its newest commit if that one had not returned
// (storecheck.LosePower; one time in four the write is taken to have
// reached the disk anyway). Nothing acknowledged may be gone: every command
// the authority answered is answered again with its first receipt, and the
// worker ends with every WorkItem verified once and its cursor at the
// authority's head; after each loss the store checks sound.
func TestPowerLossSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t0 := time.Now()
	bin := buildBinary(t, "powerloss")
	kills := envInt(t, "MWP_POWERLOSS_KILLS", 3)
	seed := envInt(t, "MWP_KILL_SEED", int(time.Now().UnixNano()%1_000_000))
	t.Logf("built after %v; MWP_POWERLOSS_KILLS=%d MWP_KILL_SEED=%d", time.Since(t0), kills, seed)

	t.Run("authority", func(t *testing.T) {
		f := newAuthorityFixtureOf(t, bin)
		pl := &powerLoss{t: t}
		authorityKills(t, f, kills, seed, killFault{kill: pl.cut, after: func(round int, rng *rand.Rand) {
			pl.lose(filepath.Join(f.data, authoritylite.LogFile), rng)
			if out, err := exec.Command(bin, "authority", "check", "--data", f.data).CombinedOutput(); err != nil {
				t.Fatalf("round %d: the authority's log does not check sound after the power loss: %v\n%s", round, err, out)
			}
		}})
		t.Log(pl)
	})
	t.Run("worker", func(t *testing.T) {
		k := newClusterOf(t, bin, "--slots", "2", "--demo-step", "150ms")
		pl := &powerLoss{t: t}
		workerKills(t, k, kills, seed, killFault{kill: pl.cut, after: func(round int, rng *rand.Rand) {
			// What the worker ACKed before it died, it must hold after.
			acked := metricValue(t, k.authOps, `mwp_authority_agent_acked{agent="w1",group="grp-a"}`)
			pl.lose(filepath.Join(k.workerDir, queue.FileName), rng)
			if c := storeCursor(t, k.workerDir, "grp-a"); float64(c) < acked {
				t.Fatalf("round %d: the worker ACKed grp-a up to %v, and holds only %d after the power loss", round, acked, c)
			} else {
				pl.acked = append(pl.acked, fmt.Sprintf("%v<=%d", acked, c))
			}
		}})
		t.Log(pl)
	})
}

// powerLoss applies storecheck.LosePower after each kill and counts what
// it did.
type powerLoss struct {
	t                    *testing.T
	losses, lost, synced int
	acked                []string // the worker's ACKed cursor and what its store held, per loss
}

// storeCursor is the Group's cursor in the worker store in dir.
func storeCursor(t *testing.T, dir, group string) uint64 {
	t.Helper()
	r, err := queue.OpenReader(dir, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Report()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		if g.GroupID == group {
			return g.Cursor
		}
	}
	return 0
}

// cut ends the process: three times in four inside a commit (SIGUSR1
// arms the failpoint, which kills the process as its next commit returns,
// after the meta page's fdatasync and before anyone sees it: the window a
// power loss may take), else with SIGKILL wherever it is. A process that
// commits nothing for a while is killed anyway.
func (p *powerLoss) cut(pr *proc, rng *rand.Rand) {
	if rng.IntN(4) == 0 {
		_ = pr.cmd.Process.Kill()
		return
	}
	_ = pr.cmd.Process.Signal(syscall.SIGUSR1)
	time.AfterFunc(5*time.Second, func() { _ = pr.cmd.Process.Kill() })
}

func (p *powerLoss) lose(path string, rng *rand.Rand) {
	p.t.Helper()
	if n, err := storecheck.LastCommitted(path); err != nil || n == 0 {
		// Without the record every newest commit would be taken as
		// unsynced, and the suite would not be testing what it says.
		p.t.Fatalf("no commit recorded beside %s (%v): is the binary built with the powerloss tag?", path, err)
	}
	_, lost, err := storecheck.LosePower(path, rng.IntN(4) == 0)
	if err != nil {
		p.t.Fatal(err)
	}
	p.losses++
	if lost {
		p.lost++
	} else {
		p.synced++
	}
}

func (p *powerLoss) String() string {
	s := fmt.Sprintf("%d power losses: %d lost the newest commit (its Commit had not returned), %d kept every commit", p.losses, p.lost, p.synced)
	if len(p.acked) > 0 {
		s += "; worker ACKed <= held: " + strings.Join(p.acked, " ")
	}
	return s
}
