package main

import (
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/queue"
)

// resync empties a Group of a stopped worker's store, refuses while the
// store is held, and names what it could not do on one line.
func TestResync(t *testing.T) {
	dir := t.TempDir()
	s := inspectStore(t, dir)
	if code, _, errOut := runCLI(t, "resync", "--data", dir, "--group", "grp-a"); code != 1 || !strings.Contains(errOut, "locked by process") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("resync while the store is open: %d %q", code, errOut)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "resync", "--data", dir, "--group", "grp-a")
	if code != 0 || out != "group grp-a reset: cursor was 4\n" {
		t.Fatalf("resync: %d %q %q", code, out, errOut)
	}
	s, err := queue.Open(dir, queue.Options{NoSync: true, NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cursor("grp-a") != 0 || len(s.Items("grp-a")) != 0 {
		t.Fatalf("after resync: cursor %d, %d items", s.Cursor("grp-a"), len(s.Items("grp-a")))
	}
	s.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", dir, "--group", "grp-x"}, "unknown group grp-x"},
		{[]string{"--data", t.TempDir(), "--group", "grp-a"}, "no worker store at"},
	} {
		code, _, errOut := runCLI(t, append([]string{"resync"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("resync %v: %d %q, want one line with %q", tc.args, code, errOut, tc.want)
		}
	}
}
