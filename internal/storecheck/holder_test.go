package storecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestLockHolderLine(t *testing.T) {
	dev := uint64(8<<8 | 1) // 08:01
	for _, tc := range []struct {
		line string
		pid  int
		ok   bool
	}{
		{"1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF", 1234, true},
		{"2: FLOCK  ADVISORY  READ 99 08:01:5678 0 EOF", 99, true},
		{"1: -> FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF", 0, false}, // a waiter
		{"1: FLOCK  ADVISORY  WRITE 1234 08:01:5679 0 EOF", 0, false},    // another inode
		{"1: FLOCK  ADVISORY  WRITE 1234 08:02:5678 0 EOF", 0, false},    // another device
		{"1: FLOCK  ADVISORY  WRITE 0 08:01:5678 0 EOF", 0, false},       // another PID namespace
		{"1: POSIX", 0, false},
		{"", 0, false},
	} {
		if pid, ok := lockHolder(tc.line, dev, 5678); pid != tc.pid || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.line, pid, ok, tc.pid, tc.ok)
		}
	}
	if devMajor(uint64(259)<<8|3) != 259 || devMinor(uint64(259)<<8|3) != 3 {
		t.Error("dev_t split")
	}
}

// A bbolt file open in this process is named as held by it.
func TestHolderNamesThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks here")
	}
	path := filepath.Join(t.TempDir(), "x.db")
	if _, _, ok := Holder(path); ok {
		t.Fatal("a missing file has a holder")
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pid, what, ok := Holder(path)
	if !ok || pid != os.Getpid() || !strings.HasPrefix(what, "process ") {
		t.Fatalf("held by this process: %d %q %v, want %d", pid, what, ok, os.Getpid())
	}
	db.Close()
	if _, _, ok := Holder(path); ok {
		t.Fatal("a closed file still has a holder")
	}
}
