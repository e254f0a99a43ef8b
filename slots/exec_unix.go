//go:build unix

package slots

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup starts the program as the leader of a new process
// group, so everything it spawns can be killed with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the program's whole process group; errors mean it is
// already gone.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// waitGroupGone waits, bounded, until no process of the killed program's
// group is left: SIGKILL is delivered asynchronously, so a grandchild may
// still run for a moment after its leader was reaped. A zombie nobody
// reaps counts as alive here; the bound keeps that from stalling the slot.
func waitGroupGone(cmd *exec.Cmd, bound time.Duration) {
	if cmd.Process == nil {
		return
	}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-cmd.Process.Pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
