//go:build !unix

package slots

import (
	"os/exec"
	"time"
)

// setProcessGroup is a no-op where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// killGroup kills only the program itself on systems without process
// groups.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// waitGroupGone has nothing to wait for without process groups.
func waitGroupGone(*exec.Cmd, time.Duration) {}
