package slots

import (
	"os/exec"
	"sync"
)

// live are the handler programs started by this process and not yet
// reaped and gone, so that an exit that cannot wait for the slots (a
// second signal) still leaves none of them behind (EXTERNAL.md).
var live struct {
	mu   sync.Mutex
	cmds map[*exec.Cmd]struct{}
}

func trackProcess(cmd *exec.Cmd) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.cmds == nil {
		live.cmds = map[*exec.Cmd]struct{}{}
	}
	live.cmds[cmd] = struct{}{}
}

func untrackProcess(cmd *exec.Cmd) {
	live.mu.Lock()
	delete(live.cmds, cmd)
	live.mu.Unlock()
}

// KillAllHandlers kills the process group of every external handler this
// process started that is still running, and returns how many there were.
// It is for an exit that will not wait for the slots to stop: the process
// must not leave handlers orphaned behind it.
func KillAllHandlers() int {
	live.mu.Lock()
	cmds := make([]*exec.Cmd, 0, len(live.cmds))
	for c := range live.cmds {
		cmds = append(cmds, c)
	}
	live.mu.Unlock()
	for _, c := range cmds {
		killGroup(c)
	}
	return len(cmds)
}
