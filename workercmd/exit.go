package workercmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
)

// ExitError carries a process exit code without printing anything more:
// the command has already said why on stderr.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// FailLine writes a command's last word, the line saying why it stops
// with an error: as it is, or with --log-format json as an ERROR log
// line, so that every line on stderr is in the chosen format.
func FailLine(cmd *cli.Command, w io.Writer, line string) {
	if cmd.String("log-format") == "json" {
		slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: jsonAttr})).Error(line)
		return
	}
	fmt.Fprintln(w, line)
}

// SyncWriter serializes writes to W.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}

// ExitFailedWrite is the exit status after a failed write to the
// authority's log (EX_TEMPFAIL): restarting reloads what is durable.
const ExitFailedWrite = 75

// StopWhenFailed ends ctx when a write to the authority's log fails: from
// then on it can only refuse, so the process exits and its supervisor
// restarts it (docs/operations.md).
func StopWhenFailed(ctx context.Context, svc *authoritylite.Service, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-svc.Failed():
			log.Error("a write to the authority's log failed; exiting so a restart reloads what is durable", "err", svc.Err())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// FailedWrite is the exit after a failed write, or nil.
func FailedWrite(stderr io.Writer, what string, svc *authoritylite.Service) error {
	if err := svc.Err(); err != nil {
		fmt.Fprintf(stderr, "%s: a write to the authority's log failed: %v; restart to reload what is durable\n", what, err)
		return ExitError{ExitFailedWrite}
	}
	return nil
}
