package storecheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// ErrInUse is returned by CompactFile for a store another process holds.
var ErrInUse = errors.New("the store is in use")

// CompactResult is what CompactFile did.
type CompactResult struct {
	Path          string
	Before, After int64 // file sizes in bytes
}

// compactTxSize bounds one transaction of bbolt.Compact's copy.
const compactTxSize = 64 << 20

// CompactFile rewrites a stopped store's bbolt file with bbolt.Compact so
// its free pages are given back to the file system. It holds the file's
// lock throughout (a store in use is refused with ErrInUse, naming the
// holder when /proc/locks tells it), writes the copy to PATH.compact
// beside it, fsyncs it, renames it over the file and fsyncs the
// directory. On any failure before the rename the original is kept and
// the copy removed; a crash leaves either the old file or the new one,
// and at most a stale PATH.compact, removed by the next run. after, when
// not nil, runs on the new file's path before the rename.
func CompactFile(path string, timeout time.Duration, after func(tmp string) error) (CompactResult, error) {
	res := CompactResult{Path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return res, err
	}
	res.Before = fi.Size()
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return res, fmt.Errorf("%w: %s is locked by %s; stop it first", ErrInUse, path, holderOf(path))
		}
		return res, err
	}
	defer src.Close()
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	if err := compactInto(src, tmp, fi.Mode().Perm()); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("compact %s: %w (the original is unchanged)", path, err)
	}
	if after != nil {
		if err := after(tmp); err != nil {
			os.Remove(tmp)
			return res, fmt.Errorf("compact %s: %w (the original is unchanged)", path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return res, err
	}
	if fi, err := os.Stat(path); err == nil {
		res.After = fi.Size()
	}
	return res, nil
}

// compactInto copies src into a new file at tmp and makes it durable.
func compactInto(src *bolt.DB, tmp string, mode os.FileMode) error {
	dst, err := bolt.Open(tmp, mode, &bolt.Options{NoSync: true})
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, src, compactTxSize); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// holderOf names the process holding path's lock for a message, or
// "another process" when Holder cannot tell.
func holderOf(path string) string {
	if _, who, ok := Holder(path); ok {
		return who
	}
	return "another process"
}
