package python

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The installed module is the shipped one, and an interpreter found by
// Find imports it from a script's directory with an empty environment, as
// a slot runs it.
func TestInstallAndImport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "py")
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ModuleFile))
	if err != nil || !bytes.Equal(got, Module) || len(Module) == 0 {
		t.Fatalf("installed %d bytes, shipped %d: %v", len(got), len(Module), err)
	}
	py, err := Find()
	if err != nil {
		t.Skip(err)
	}
	script := filepath.Join(dir, "probe.py")
	if err := os.WriteFile(script, []byte("import mwpslot\nprint(mwpslot.PROTOCOL)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || string(bytes.TrimSpace(out)) != "mwp-slot/1" {
		t.Fatalf("%s: %v", out, err)
	}
}
