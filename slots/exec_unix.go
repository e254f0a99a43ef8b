//go:build unix

package slots

import (
	"os/exec"
	"syscall"
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
