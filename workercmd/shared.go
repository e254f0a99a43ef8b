package workercmd

import (
	"log/slog"
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
