// Package python ships mwpslot.py, the helper module for external
// handlers written in Python (protocol mwp-slot/1, slots/EXTERNAL.md), so
// that a Go program can install it beside the scripts it runs through
// slots.Exec. The module's own tests are test_mwpslot.py
// (python3 -m unittest, run by .ci/run).
package python

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleFile is the module's file name: a script beside it imports mwpslot.
const ModuleFile = "mwpslot.py"

// Module is the text of mwpslot.py.
//
//go:embed mwpslot.py
var Module []byte

// Install writes the module into dir (created when missing).
func Install(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ModuleFile), Module, 0o644)
}

// Find returns the path of the real python3 executable: the one python3
// on PATH reports as sys.executable, so that a launcher shim, which needs
// the caller's environment, is not what a slot runs with its bare one.
func Find() (string, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return "", fmt.Errorf("python: no python3 on PATH: %w", err)
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("python: python3: %w", err)
	}
	p := strings.TrimSpace(string(out))
	if p == "" {
		return "", fmt.Errorf("python: python3 names no executable")
	}
	return p, nil
}
