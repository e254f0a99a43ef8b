package queue

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const (
	crashEnv      = "MWP_QUEUE_CRASH_DIR"
	crashPruneEnv = "MWP_QUEUE_CRASH_PRUNE"
)

// crashOpts are the child's options: with pruning as often as the bounds
// allow when crashPruneEnv is set.
func crashOpts() Options {
	if os.Getenv(crashPruneEnv) != "" {
		return Options{NoSocket: true, PruneTail: MinTailEvents, PruneEvery: 3}
	}
	return Options{NoSocket: true}
}

func crashStream() *stream { return randomStream("g", 25, rand.New(rand.NewPCG(11, 12))) }

// crashChild delivers the stream with duplicates and reordering, printing
// the durable cursor after every batch, until it is killed or done. Each
// batch is one Commit, as the session loop's turn: with its events it puts
// Command act-K and takes act-(K-1), answered, out of the outbox.
func crashChild(dir string) {
	st := crashStream()
	s, err := Open(dir, crashOpts())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	r := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	n := uint64(len(st.evs))
	k := crashOutboxBatch(s)
	for c := s.Cursor("g"); c < n; c = s.Cursor("g") {
		lo, hi := int(c)-min(int(c), 3), min(len(st.evs), int(c)+12)
		window := append([]Incoming(nil), st.evs[lo:hi]...)
		r.Shuffle(len(window), func(i, j int) { window[i], window[j] = window[j], window[i] })
		k++
		put, err := NewOutboxPut(command(fmt.Sprintf("act-%d", k), "work.start"))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		b := Batch{Events: window[:1+r.IntN(len(window))], Puts: []OutboxPut{put}, Answered: []string{fmt.Sprintf("act-%d", k-1)}}
		if _, err := s.Commit(b); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("batch", k, "cursor", s.Cursor("g"))
	}
	s.Close()
	fmt.Println("done")
	os.Exit(0)
}

// A worker killed (SIGKILL) at arbitrary points while applying batches
// loses nothing it committed and applies nothing twice: after each kill the
// store equals in-order delivery of exactly its cursor's prefix.
func TestCrashKillChild(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	crashKill(t, "TestCrashKillChild", false)
}

// The same with the inbox pruned as often as the bounds allow: a kill
// inside a pruning commit loses nothing and prunes nothing half; the
// projection is full replay's and the inbox holds its events after the
// base.
func TestCrashKillChildPruning(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	crashKill(t, "TestCrashKillChildPruning", true)
}

func crashKill(t *testing.T, name string, prune bool) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	// stateOf and reference, for the part of the inbox after s's base.
	state := func(s *Store) string { return dumpProjection(t, s.db, "g") + inboxFrom(t, s.db, "g", baseOf(s, "g")) }
	want := func(s *Store, evs []Incoming) string {
		ref := openTest(t, t.TempDir(), Options{NoSync: true, NoSocket: true, NoPrune: true})
		if len(evs) > 0 {
			mustApply(t, ref, evs...)
		}
		return dumpProjection(t, ref.db, "g") + inboxFrom(t, ref.db, "g", baseOf(s, "g"))
	}
	st := crashStream()
	dir := t.TempDir()
	for _, killAt := range []uint64{15, 60, 110} {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		if prune {
			cmd.Env = append(cmd.Env, crashPruneEnv+"=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var last, batch uint64
		cursorAt := map[uint64]uint64{}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
			var k, c uint64
			if _, err := fmt.Sscanf(line, "batch %d cursor %d", &k, &c); err == nil {
				last, batch, cursorAt[k] = c, k, c
				if last >= killAt {
					break
				}
			}
		}
		cmd.Process.Kill()
		// The child ran on until the kill: what it printed meanwhile
		// names the batches it committed.
		for sc.Scan() {
			var k, c uint64
			if _, err := fmt.Sscanf(sc.Text(), "batch %d cursor %d", &k, &c); err == nil {
				batch, cursorAt[k] = k, c
			}
		}
		cmd.Wait()

		s := openTest(t, dir, Options{NoSocket: true})
		c := s.Cursor("g")
		if c < last {
			t.Fatalf("kill at %d: cursor %d is behind the %d the child reported durable", killAt, c, last)
		}
		// The outbox moved with the events: the last batch committed is
		// the last one reported or the next (killed before printing it),
		// never half of one.
		k := crashOutboxBatch(s)
		if k != batch && k != batch+1 {
			t.Fatalf("kill at %d: outbox holds batch %d's Command, the child reported batch %d", killAt, k, batch)
		}
		if want, ok := cursorAt[k]; ok && c != want {
			t.Fatalf("kill at %d: cursor %d with batch %d's Command in the outbox; that batch left cursor %d", killAt, c, k, want)
		}
		w := want(s, st.evs[:c])
		if got := state(s); got != w {
			t.Fatalf("kill at %d: store differs from in-order delivery of its %d events:\n%s\nwant\n%s", killAt, c, got, w)
		}
		if prune && c >= 40 && baseOf(s, "g") == 0 {
			t.Fatalf("kill at %d: nothing pruned at cursor %d", killAt, c)
		}
		if err := s.Rebuild(); err != nil {
			t.Fatal(err)
		}
		if got := state(s); got != w {
			t.Fatalf("kill at %d: rebuild differs", killAt)
		}
		closeChecked(t, s)
	}
	s := openTest(t, dir, Options{NoSocket: true})
	defer s.Close()
	mustApply(t, s, st.evs...)
	if got, w := state(s), want(s, st.evs); got != w {
		t.Fatalf("final store differs from in-order delivery")
	}
}

// crashOutboxBatch is K of the one Command act-K the crash child's outbox
// holds (0 when empty); it exits the child or panics the test on more.
func crashOutboxBatch(s *Store) uint64 {
	var ids []string
	for e, err := range s.Outbox() {
		if err != nil {
			panic(err)
		}
		ids = append(ids, e.ActionID)
	}
	switch len(ids) {
	case 0:
		return 0
	case 1:
		k, err := strconv.ParseUint(strings.TrimPrefix(ids[0], "act-"), 10, 64)
		if err == nil {
			return k
		}
	}
	panic(fmt.Sprintf("outbox %v: want at most one act-K", ids))
}
