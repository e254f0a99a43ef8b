package checkpoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

const (
	crashEnv  = "MWP_CHECKPOINT_CRASH_DIR"
	crashMode = "MWP_CHECKPOINT_CRASH_MODE"
)

// crashState is the state of step i: every third one is a blob, and
// every sixth repeats one content so blobs are shared.
func crashState(i int) []byte {
	switch {
	case i%6 == 0:
		return gen(-1, 40<<10)
	case i%3 == 0:
		return gen(i, 40<<10)
	}
	return gen(i, 2<<10)
}

var crashKey = Key{"grp-a", "wi-1", 1}

// crashChild saves steps from Latest+1 on, printing each committed step.
// In mode "after-blob" it dies right after the first blob is durable and
// before its record commits.
func crashChild(dir, mode string) {
	db, err := bolt.Open(filepath.Join(dir, "worker.db"), 0o600, nil)
	if err == nil {
		var s *Store
		if s, err = OpenOptions(db, filepath.Join(dir, "blobs"), Options{Keep: 3}); err == nil {
			if mode == "after-blob" {
				s.afterBlob = func() error { os.Exit(3); return nil }
			}
			start := 1
			if c, lerr := s.Latest(crashKey.GroupID, crashKey.WorkItemID); lerr == nil {
				start, _ = strconv.Atoi(strings.TrimPrefix(c.Phase, "step-"))
				start++
			}
			for i := start; i < start+1000; i++ {
				if _, err = s.Save(crashKey, t0, Meta{Phase: fmt.Sprintf("step-%d", i)}, crashState(i)); err != nil {
					break
				}
				fmt.Println("saved", i)
			}
		}
	}
	fmt.Println("error", err)
	os.Exit(2)
}

// A process killed (SIGKILL) at arbitrary points while saving leaves the
// last committed checkpoint or a newer one, never a torn one, and the next
// Open removes the blob files the kill orphaned.
func TestCrashKillChild(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir, os.Getenv(crashMode))
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	for round, killAfter := range []int{1, 4, 9, 2, 7} {
		last := runChild(t, dir, "", killAfter)
		checkAfterCrash(t, dir, last, fmt.Sprintf("round %d", round))
	}
}

// Death between a durable blob and its record: the old checkpoint is the
// latest, and the blob written for the lost one is collected at Open.
func TestCrashAfterBlob(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	last := runChild(t, dir, "", 1) // some history first
	// The kill lands after the child reported step 1, so it may have
	// committed a few more: what counts is what the store holds now.
	hist := checkAfterCrash(t, dir, last, "history")
	last, _ = strconv.Atoi(strings.TrimPrefix(hist.Phase, "step-"))
	// The after-blob child commits inline steps until its first blob step
	// (every third), where it dies between blob and record.
	last = max(last, runChild(t, dir, "after-blob", -1))
	before := blobFileNames(t, dir)
	got := checkAfterCrash(t, dir, last, "after blob")
	if got.Phase != fmt.Sprintf("step-%d", last) {
		t.Fatalf("latest is %s, want step-%d: the blob-only save must not count", got.Phase, last)
	}
	// checkAfterCrash proved the directory now holds only referenced
	// blobs; the dead child's blob was one more.
	if after := blobFileNames(t, dir); len(before) != len(after)+1 {
		t.Fatalf("blob files before reopen %v, after %v: want exactly one orphan collected", before, after)
	}
}

// runChild runs crashChild and kills it once it has reported killAfter
// saves (-1: let it die by itself); it returns the last reported step.
func runChild(t *testing.T, dir, mode string, killAfter int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashMode+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	last, n := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "saved "); ok {
			last, _ = strconv.Atoi(s)
			if n++; n == killAfter {
				break
			}
		} else if strings.HasPrefix(line, "error") {
			t.Fatalf("child: %s", line)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return last
}

func checkAfterCrash(t *testing.T, dir string, last int, what string) Checkpoint {
	t.Helper()
	db := openDB(t, dir, false)
	defer closeChecked(t, db)
	s, err := OpenOptions(db, filepath.Join(dir, "blobs"), Options{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Latest(crashKey.GroupID, crashKey.WorkItemID)
	if last == 0 && errors.Is(err, ErrNotFound) {
		return got
	}
	if err != nil {
		t.Fatalf("%s: latest: %v", what, err)
	}
	step, _ := strconv.Atoi(strings.TrimPrefix(got.Phase, "step-"))
	// The child may commit more before the kill lands, never less.
	if step < last {
		t.Fatalf("%s: latest is step %d, child reported %d committed", what, step, last)
	}
	if !bytes.Equal(got.State, crashState(step)) || got.Seq != uint64(step) {
		t.Fatalf("%s: step %d has the wrong state or seq %d", what, step, got.Seq)
	}
	// Every kept checkpoint is whole, and the blob directory holds exactly
	// the referenced blobs.
	list, err := s.List(crashKey.GroupID, crashKey.WorkItemID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if _, err := s.Get(c.ID); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refs, err := s.Blobs()
	if err != nil {
		t.Fatal(err)
	}
	files := blobFileNames(t, dir)
	slices.Sort(refs)
	if !slices.Equal(files, refs) {
		t.Fatalf("%s: blob files %v, referenced %v", what, files, refs)
	}
	return got
}

func blobFileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
