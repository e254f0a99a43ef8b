//go:build unix

package coordinator

import (
	"os/exec"
	"syscall"
)

// ownGroup makes a check the leader of its own process group, killed
// whole when it is cancelled: nothing a check starts outlives it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
