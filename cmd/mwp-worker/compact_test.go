package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/queue"
)

// TestCompactCommands: compact prints the sizes before and after; a store
// in use is refused in one line, exit 1.
func TestCompactCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, queue.FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLIWithTimeout(t, time.Minute, "compact", "--data", dir, "--timeout", "50ms")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "in use") {
		t.Fatalf("compact of a store in use: exit %d, stderr %q", code, stderr)
	}
	db.Close()
	code, stdout, stderr := runCLIWithTimeout(t, time.Minute, "compact", "--data", dir)
	if code != 0 || !strings.Contains(stdout, " from ") || !strings.Contains(stdout, " to ") {
		t.Fatalf("compact: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runCLIWithTimeout(t, time.Minute, "authority", "compact", "--data", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "authority compact:") {
		t.Fatalf("authority compact without a log: exit %d, stderr %q", code, stderr)
	}
}
