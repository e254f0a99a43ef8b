package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// tmpPrefix marks a blob still being written; GC removes such files.
const tmpPrefix = ".tmp-"

// writeBlob makes dir/hexSum hold data durably: temp file, fsync, rename,
// fsync of the directory. The caller holds mu.
func (s *Store) writeBlob(hexSum string, data []byte) error {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("checkpoint: blob: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("checkpoint: blob %s: %w", hexSum, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if s.sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, hexSum)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint: blob %s: %w", hexSum, err)
	}
	if s.sync {
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("checkpoint: blob %s: %w", hexSum, err)
		}
	}
	return nil
}

// readBlob returns the content of blob hexSum after checking its hash. A
// missing blob is ErrCorrupt: its record committed after the file was
// durable.
func (s *Store) readBlob(hexSum string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, hexSum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s is missing", ErrCorrupt, hexSum)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: blob %s: %w", hexSum, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != hexSum {
		return nil, fmt.Errorf("%w: blob %s does not match its hash", ErrCorrupt, hexSum)
	}
	return data, nil
}

// removeBlobsLocked deletes blob files no record references any more. A
// crash before it finishes leaves orphans for the next GC.
func (s *Store) removeBlobsLocked(hexSums []string) {
	for _, h := range hexSums {
		os.Remove(filepath.Join(s.dir, h))
	}
}

// dropIfUnreferencedLocked removes blob hexSum written for a Save that did
// not commit, unless a committed record uses the same content.
func (s *Store) dropIfUnreferencedLocked(hexSum string) {
	var used bool
	s.db.View(func(tx *bolt.Tx) error {
		used = tx.Bucket(bktRoot).Bucket(bktBlobs).Get([]byte(hexSum)) != nil
		return nil
	})
	if !used {
		s.removeBlobsLocked([]string{hexSum})
	}
}

// GC removes unfinished temp files and blob files that no record
// references, and returns how many files it removed. Open runs it; files
// in the blob directory that are neither are left alone.
func (s *Store) GC() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: gc: %w", err)
	}
	var doomed []string
	err = s.db.View(func(tx *bolt.Tx) error {
		blobs := tx.Bucket(bktRoot).Bucket(bktBlobs)
		for _, e := range entries {
			name := e.Name()
			switch {
			case strings.HasPrefix(name, tmpPrefix):
				doomed = append(doomed, name)
			case isHexSum(name) && blobs.Get([]byte(name)) == nil:
				doomed = append(doomed, name)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: gc: %w", err)
	}
	n := 0
	for _, name := range doomed {
		if err := os.Remove(filepath.Join(s.dir, name)); err == nil {
			n++
		} else if !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("checkpoint: gc: %w", err)
		}
	}
	return n, nil
}

// Blobs returns the names of the blob files referenced by records, for
// inspection and tests.
func (s *Store) Blobs() ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktRoot).Bucket(bktBlobs).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}

func isHexSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
