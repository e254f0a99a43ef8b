package authoritylite

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// firstStart opens a new authority in a fresh directory with a key file,
// as `authority serve` does, closes it and returns the directory and the
// log's identity.
func firstStart(t *testing.T) (string, LogIdentity) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Identity()
	if !strings.HasPrefix(id.LogID, "log-") || id.KeyID != s.PublicKey().KeyID || id.CreatedAt.IsZero() {
		t.Fatalf("identity of a first start: %+v", id)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// TestLogIdentityRefusals damages the pairing of log and key one way per
// row and requires Open to refuse with the row's reason, naming both files.
func TestLogIdentityRefusals(t *testing.T) {
	otherKey := func(t *testing.T, dir string) {
		// Same keyId, other key: what `keygen` or a lost key file gives.
		k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, "authority-1", "k1"), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{KeyFile, "authority.pub"} {
			os.Remove(filepath.Join(dir, f))
		}
		if _, _, err := protocol.WriteKeyFiles(dir, "authority", k); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		init   bool
		reason string
	}{
		{"log truncated to zero", func(t *testing.T, dir string) { truncate(t, filepath.Join(dir, LogFile), 0) }, false, ReasonLogMissing},
		{"log removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, LogFile)) }, false, ReasonLogMissing},
		{"log replaced by an empty bbolt file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, LogFile))
			db, err := bolt.Open(filepath.Join(dir, LogFile), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
		}, false, ReasonLogMissing},
		{"key replaced by another under the same keyId", otherKey, false, ReasonLogKeyMismatch},
		{"key removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, KeyFile)) }, false, ReasonKeyMissing},
		{"init over an existing log", func(*testing.T, string) {}, true, ReasonLogExists},
		{"init over a log of another key", otherKey, true, ReasonLogExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := firstStart(t)
			c.damage(t, dir)
			_, err := Open(Config{Dir: dir, Init: c.init})
			if got := ReasonOf(err); got != c.reason {
				t.Fatalf("Open: reason %q, want %q (err %v)", got, c.reason, err)
			}
			if protocol.CodeOf(err) != protocol.CodeInternalError || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line INTERNAL_ERROR, got %v", err)
			}
			names := []string{LogFile, KeyFile}
			if c.reason == ReasonLogExists {
				names = names[:1]
			}
			for _, f := range names {
				if !strings.Contains(err.Error(), filepath.Join(dir, f)) {
					t.Fatalf("error does not name %s: %v", f, err)
				}
			}
			if c.reason == ReasonKeyMissing {
				if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
					t.Fatal("a refused Open wrote a new key beside the log")
				}
			}
		})
	}
}

// A new log beside the key needs Init; it gets a new identity, and the
// next start without Init opens it.
func TestLogInitStartsNewLog(t *testing.T) {
	dir, first := firstStart(t)
	truncate(t, filepath.Join(dir, LogFile), 0)
	s, err := Open(Config{Dir: dir, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	second := s.Identity()
	s.Close()
	if second.LogID == first.LogID || second.KeyID != first.KeyID {
		t.Fatalf("init gave %+v after %+v", second, first)
	}
	s, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Identity() != second {
		t.Fatalf("reopen: %+v, want %+v", s.Identity(), second)
	}
}

// A Config.Key is checked against the log like a key file.
func TestLogIdentityConfigKey(t *testing.T) {
	dir := t.TempDir()
	k1 := mustKey(t, protocol.ActorService, "authority-1")
	s, err := Open(Config{Dir: dir, Key: k1})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(Config{Dir: dir, Key: k1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(Config{Dir: dir, Key: mustKey(t, protocol.ActorService, "authority-1")})
	if ReasonOf(err) != ReasonLogKeyMismatch {
		t.Fatalf("other Config.Key: %v", err)
	}
}

// A log written before identities were recorded is adopted by the key
// beside it, and held to that key from then on.
func TestLogIdentityAdoptsOlderLog(t *testing.T) {
	dir, _ := firstStart(t)
	db, err := bolt.Open(filepath.Join(dir, LogFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLog) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("older log: %v", err)
	}
	id := s.Identity()
	s.Close()
	if id.LogID == "" || !id.sameKey(s.PublicKey()) {
		t.Fatalf("adopted identity %+v", id)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}
