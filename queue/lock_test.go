package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A second Open of a data directory a worker already holds says which
// process holds it, instead of bbolt's bare "timeout".
func TestOpenLockedNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(dir, Options{NoSync: true, NoSocket: true})
	if !errors.Is(err, ErrLocked) || !errors.Is(err, bolt.ErrTimeout) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if want := fmt.Sprintf("process %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Fatalf("second open: %q does not name %s", err, want)
	}
}
