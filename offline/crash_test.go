package offline

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

const crashEnv = "MWP_OFFLINE_CRASH_DB"

const crashTotal = 60

// indexOf reads n back from the actionId act-wi-7-<n> of signedBuffered.
func indexOf(actionID string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(actionID, "act-wi-7-"))
	if err != nil {
		return -1
	}
	return n
}

// crashChild appends the deterministic commands after the last one it
// finds, acknowledging the oldest whenever more than five are pending, and
// prints each step once its commit returned, until killed or done.
func crashChild(path string) {
	fail := func(err error) { fmt.Println("error", err); os.Exit(2) }
	db, err := bolt.Open(path, 0o600, nil) // fsync on: what a real worker runs
	if err != nil {
		fail(err)
	}
	buf, err := OpenBuffer(db, Limits{MaxCommands: 8})
	if err != nil {
		fail(err)
	}
	es, err := buf.Pending()
	if err != nil {
		fail(err)
	}
	next := 0
	if len(es) > 0 {
		next = indexOf(es[len(es)-1].ActionID) + 1
	}
	key := testKey(&testing.T{})
	for i := next; i < crashTotal; i++ {
		if _, err := buf.Append(signedBuffered(&testing.T{}, key, i)); err != nil {
			fail(err)
		}
		fmt.Println("appended", i)
		if es, err = buf.Pending(); err != nil {
			fail(err)
		}
		for ; len(es) > 5; es = es[1:] {
			if err := buf.Remove(es[0].ID); err != nil {
				fail(err)
			}
			fmt.Println("removed", indexOf(es[0].ActionID))
		}
	}
	db.Close()
	fmt.Println("done")
	os.Exit(0)
}

// A worker killed (SIGKILL) at arbitrary points while buffering loses no
// command whose Append returned, resurrects none it removed, keeps order and
// consistent counters, and carries on after the restart.
func TestCrashKillChild(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	key := testKey(t)
	path := filepath.Join(t.TempDir(), "worker.db")
	for _, killAt := range []int{7, 23, 41, crashTotal} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillChild$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		appended, removed := -1, -1
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
			if v, ok := strings.CutPrefix(line, "appended "); ok {
				appended, _ = strconv.Atoi(v)
			}
			if v, ok := strings.CutPrefix(line, "removed "); ok {
				removed, _ = strconv.Atoi(v)
			}
			if appended >= killAt {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()

		db := openDB(t, path, false)
		buf := openBuffer(t, db, Limits{MaxCommands: 8})
		es := pending(t, buf)
		if len(es) == 0 {
			t.Fatalf("kill at %d: buffer empty", killAt)
		}
		first, last := indexOf(es[0].ActionID), indexOf(es[len(es)-1].ActionID)
		if last < appended {
			t.Fatalf("kill at %d: command %d was reported durable but the buffer ends at %d", killAt, appended, last)
		}
		if first <= removed {
			t.Fatalf("kill at %d: command %d was removed but the buffer starts at %d", killAt, removed, first)
		}
		var size int64
		for i, e := range es {
			if indexOf(e.ActionID) != first+i || (i > 0 && e.ID <= es[i-1].ID) {
				t.Fatalf("kill at %d: pending[%d] is %s (id %d): gap, duplicate or reorder", killAt, i, e.ActionID, e.ID)
			}
			if !bytes.Equal(e.Signed, signedBuffered(t, key, first+i)) {
				t.Fatalf("kill at %d: %s bytes changed", killAt, e.ActionID)
			}
			size += int64(len(e.Signed))
		}
		if n, sz, err := buf.Len(); err != nil || n != len(es) || sz != size {
			t.Fatalf("kill at %d: counters %d/%d, entries %d/%d (%v)", killAt, n, sz, len(es), size, err)
		}
		checkAndClose(t, db) // bbolt's own consistency check, then free the lock
	}
}
