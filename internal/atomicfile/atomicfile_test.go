package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile replaces a file and fsyncs its directory after the rename.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	var order []string
	setSeams(t, func(old, new string) error {
		order = append(order, "rename")
		return os.Rename(old, new)
	}, func(d string) error {
		order = append(order, "syncdir "+d)
		return SyncDir(d)
	})
	for _, content := range []string{"one", "two"} {
		if err := WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		mustRead(t, path, content)
	}
	want := []string{"rename", "syncdir " + dir, "rename", "syncdir " + dir}
	if len(order) != len(want) {
		t.Fatalf("calls %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("calls %q, want %q", order, want)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	mustOnly(t, dir, "f")
}

// TestWriteFileCrashBeforeRename: a write that fails before the rename (as
// a crash there would) leaves the original intact and no temporary file,
// and reopening reads the old content.
func TestWriteFileCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	synced := false
	setSeams(t, func(string, string) error { return crash }, func(string) error {
		synced = true
		return nil
	})
	if err := WriteFile(path, []byte("new"), 0o600); !errors.Is(err, crash) {
		t.Fatalf("err %v, want the injected failure", err)
	}
	if synced {
		t.Error("directory fsynced after a failed rename")
	}
	mustRead(t, path, "old")
	mustOnly(t, dir, "f")
}

// TestWriteFileNoDir fails cleanly when the directory is missing.
func TestWriteFileNoDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	if err := WriteFile(path, []byte("x"), 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want not exist", err)
	}
}

func setSeams(t *testing.T, r func(string, string) error, s func(string) error) {
	oldR, oldS := rename, syncDir
	rename, syncDir = r, s
	t.Cleanup(func() { rename, syncDir = oldR, oldS })
}

func mustRead(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", path, got, want)
	}
}

func mustOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) || (len(got) > 0 && got[0] != names[0]) {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// TestCreateFile writes a new file once and refuses to replace it.
func TestCreateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := CreateFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(path, []byte("second"), 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("err %v, want exists", err)
	}
	mustRead(t, path, "first")
	mustOnly(t, dir, "key")
}
