// Package atomicfile replaces a file so that a crash leaves either the old
// content or the new, never a torn or empty file.
package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
)

// Seams for tests: a failure injected here must leave the original file.
var (
	rename  = os.Rename
	syncDir = SyncDir
)

// link places a new file and removes its temporary name.
func link(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}

// WriteFile makes path hold data with permissions perm: a temporary file
// in the same directory, write, fsync, rename over path, fsync of the
// directory (without it the rename itself may not survive a power loss).
// On any failure before the rename, path keeps its old content and the
// temporary file is removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, rename)
}

// CreateFile is WriteFile for a file that must not exist yet: an existing
// path is an error matching os.ErrExist and is left alone. It links the
// temporary file into place, since os.Link fails atomically when the
// target exists, where a check followed by rename would race.
func CreateFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, link)
}

func write(path string, data []byte, perm os.FileMode, place func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := writeSync(f, data, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := place(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeSync writes, fsyncs and closes f; it always closes f.
func writeSync(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir fsyncs a directory so that a rename, create or remove in it is
// durable. Windows cannot open a directory for fsync; it is a no-op there.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
