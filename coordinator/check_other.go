//go:build !unix

package coordinator

import "os/exec"

// ownGroup: without process groups a cancelled check's own process is
// killed (exec's default) and WaitDelay bounds what it left running.
func ownGroup(*exec.Cmd) {}
