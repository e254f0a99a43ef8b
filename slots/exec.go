package slots

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// DefaultExitGrace is how long a process may take to exit after its
// final message before it is killed.
const DefaultExitGrace = 5 * time.Second

// Exec is a Handler that runs an external program speaking JSON lines on
// stdin/stdout (EXTERNAL.md). The program starts in the run's private
// working directory with a clean environment: PATH, HOME and TMPDIR (the
// working directory), the slot's credentials and lease, plus Env. It runs
// in its own process group, which is killed when the run is cancelled or
// the program lingers after its final message.
type Exec struct {
	Path string
	Args []string
	Cap  protocol.Capability
	// Env adds static, non-secret variables; the MWP_* names cannot be
	// overridden.
	Env map[string]string
	// ExitGrace: 0 means DefaultExitGrace.
	ExitGrace time.Duration
	// Logger receives the program's stderr, a line per record at DEBUG
	// with the run's Group, WorkItem and lease ids, and its last lines at
	// WARN when the run fails. nil: stderr only goes into failure reasons.
	Logger *slog.Logger
}

// Capability returns e.Cap.
func (e Exec) Capability() protocol.Capability { return e.Cap }

// cleanPath is the only PATH an external handler sees.
const cleanPath = "/usr/local/bin:/usr/bin:/bin"

func (e Exec) environ(w *Work, c Credentials) []string {
	s := w.Slot()
	env := map[string]string{}
	for k, v := range e.Env {
		env[k] = v
	}
	for k, v := range map[string]string{
		"PATH": cleanPath, "HOME": w.Workdir(), "TMPDIR": w.Workdir(),
		"MWP_WORKDIR":               w.Workdir(),
		"MWP_CREDENTIAL":            c.Token,
		"MWP_CREDENTIAL_EXPIRES_AT": c.ExpiresAt.UTC().Format(time.RFC3339Nano),
		"MWP_LEASE_ID":              s.LeaseID,
		"MWP_GROUP_ID":              s.GroupID,
		"MWP_WORK_ITEM_ID":          s.WorkItemID,
	} {
		env[k] = v
	}
	w.r.mu.Lock()
	env["MWP_LEASE_EXPIRES_AT"] = w.r.leaseExpires.UTC().Format(time.RFC3339Nano)
	w.r.mu.Unlock()
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Run starts the program, feeds it the start message, serves its requests
// and returns when it sends a final message (result, fail, block,
// preempted) and exits. Bad output, a silent exit or a non-zero exit
// status is a failure naming the reason and the tail of its stderr.
func (e Exec) Run(ctx context.Context, w *Work) (Result, error) {
	creds, err := w.Credentials()
	if err != nil {
		return Result{}, err
	}
	start, err := startMessage(w)
	if err != nil {
		return Result{}, Permanent(err)
	}
	cmd := exec.Command(e.Path, e.Args...)
	cmd.Dir = w.Workdir()
	cmd.Env = e.environ(w, creds)
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return Result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	var log *slog.Logger
	if e.Logger != nil {
		s := w.Slot()
		log = e.Logger.With("handler", e.Path, "group", s.GroupID, "item", s.WorkItemID, "lease", s.LeaseID)
		lines := &lineLogger{log: log}
		defer lines.flush()
		cmd.Stderr = io.MultiWriter(stderr, lines)
	}
	if err := cmd.Start(); err != nil {
		return Result{}, Permanent(fmt.Errorf("slots: start %s: %w", e.Path, err))
	}
	trackProcess(cmd)
	s := &session{w: w, stdin: stdin, enc: json.NewEncoder(stdin), lines: make(chan incoming), done: make(chan struct{}), eof: make(chan struct{})}
	kill := func() { killGroup(cmd) }
	go s.read(stdout)
	go func() { // cancellation kills at once, even a process that blocks our writes
		select {
		case <-ctx.Done():
			kill()
		case <-s.done:
		}
	}()
	defer close(s.done)

	s.send(start)
	res, runErr, final := s.serve(ctx)
	stdin.Close()
	if final && ctx.Err() == nil {
		grace := e.ExitGrace
		if grace <= 0 {
			grace = DefaultExitGrace
		}
		t := time.NewTimer(grace)
		select {
		case <-s.eof: // the program closed stdout: it is exiting
		case <-ctx.Done():
		case <-t.C:
			runErr, final = fmt.Errorf("slots: %s did not exit within %v of its final message", e.Path, grace), false
		}
		t.Stop()
	}
	kill() // nothing of the run may outlive it
	s.drain()
	waitErr := cmd.Wait()
	waitGroupGone(cmd, time.Second)
	untrackProcess(cmd)
	if ps := cmd.ProcessState; ps != nil {
		// Recorded even over budget: it was spent. The run is ending
		// either way, so the refusal changes nothing.
		_ = w.Charge(protocol.Usage{ComputeSeconds: (ps.UserTime() + ps.SystemTime()).Seconds()})
	}
	failed := ctx.Err() == nil && ((runErr != nil && !final) || (runErr == nil && waitErr != nil))
	if failed && log != nil && stderr.suffix() != "" {
		log.Warn("handler failed; the last lines of its stderr", "stderr", strings.TrimPrefix(stderr.suffix(), "; stderr: "))
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, context.Cause(ctx)
	case runErr != nil && !final:
		return Result{}, fmt.Errorf("%w%s", runErr, stderr.suffix())
	case runErr != nil: // fail, block, preempted: the program's own word
		return res, runErr
	case waitErr != nil:
		return Result{}, fmt.Errorf("slots: %s sent its result but exited with %v%s", e.Path, waitErr, stderr.suffix())
	}
	return res, nil
}

func startMessage(w *Work) (startMsg, error) {
	s := w.Slot()
	m := startMsg{Type: "start", Protocol: ExecProtocol, Contract: w.Contract(), Context: w.Context(), Extensions: w.Extensions(),
		Slot: slotMsg{GroupID: s.GroupID, MissionID: s.MissionID, WorkItemID: s.WorkItemID,
			OwnershipEpoch: s.OwnershipEpoch, LeaseID: s.LeaseID, Attempt: w.Attempt(), Agent: w.Agent()}}
	if len(m.Context) == 0 {
		m.Context = json.RawMessage("null")
	}
	if c := w.resume; c != nil {
		m.Resume = &resumeMsg{CheckpointID: c.ID, Digest: c.Digest, Phase: c.Phase, Note: c.Note,
			State: base64.StdEncoding.EncodeToString(c.State)}
	}
	return m, nil
}

// lineLogger logs each line written to it at DEBUG; a line longer than
// 4 KiB is logged in pieces.
type lineLogger struct {
	log *slog.Logger
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > 4<<10 {
				l.log.Debug("handler stderr", "line", string(l.buf))
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.log.Debug("handler stderr", "line", string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	if len(l.buf) > 0 {
		l.log.Debug("handler stderr", "line", string(l.buf))
		l.buf = nil
	}
}
