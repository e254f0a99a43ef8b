package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ExecCheck returns the RunCheck that runs a check's command (argv, no
// shell) in a fresh temporary directory holding the outputs, killed after
// timeout with every process it started, with at most maxOutput bytes of
// its standard output kept.
func ExecCheck(timeout time.Duration, maxOutput int) func(ctx context.Context, run CheckRun) (CheckResult, error) {
	return func(ctx context.Context, run CheckRun) (CheckResult, error) {
		if len(run.Command) == 0 {
			return CheckResult{}, errors.New("empty command")
		}
		dir, err := os.MkdirTemp("", "mwp-check-")
		if err != nil {
			return CheckResult{}, err
		}
		defer os.RemoveAll(dir)
		for name, data := range run.Files {
			if filepath.Base(name) != name {
				return CheckResult{}, fmt.Errorf("output file name %q", name)
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return CheckResult{}, err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, run.Command[0], run.Command[1:]...)
		cmd.Dir = dir
		ownGroup(cmd)
		cmd.WaitDelay = time.Second // a child still holding stdout does not hold the review
		out := &limited{max: maxOutput}
		cmd.Stdout = out
		err = cmd.Run()
		var exit *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return CheckResult{}, fmt.Errorf("timed out after %s", timeout)
		case errors.As(err, &exit):
			return CheckResult{ExitCode: exit.ExitCode(), Stdout: out.b.String()}, nil
		case err != nil:
			return CheckResult{}, err
		}
		return CheckResult{Stdout: out.b.String()}, nil
	}
}

// limited keeps the first max bytes written and drops the rest.
type limited struct {
	b   bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
