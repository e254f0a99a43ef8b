package workercmd

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/slots"
)

// What `mwp-worker up` shares with run: the same --handler-exec flag and
// the same way of turning it (and built-in handlers) into slot handlers,
// so the two commands cannot drift apart.

// HandlerExecFlag is run's --handler-exec flag.
func HandlerExecFlag() cli.Flag { return handlerExecFlag() }

// HandlerClarifyFlag is run's --handler-clarify flag.
func HandlerClarifyFlag() cli.Flag { return handlerClarifyFlag() }

// HandlersOf returns the handlers of cmd's --handler-exec values (those
// --handler-clarify names asked about offers too), then own, then the
// built-in demo handler for agentID (one step of step).
func HandlersOf(cmd *cli.Command, own []slots.Handler, agentID string, step time.Duration, log *slog.Logger) ([]slots.Handler, error) {
	return handlersFrom(splitList(cmd.StringSlice("handler-exec"), "\n"), cmd.StringSlice("handler-clarify"), own, demoHandler{agentID: agentID, step: step}, log)
}

// AllOf is a health check that passes when every one of checks does.
func AllOf(checks ...func() error) func() error { return allOf(checks...) }

// OneLine keeps an error message on one line of stderr.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// IsTerminal reports whether r is a character device other than the null
// device (a terminal), so a prompt never waits on a pipe, a file or
// /dev/null that no human types into.
func IsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
