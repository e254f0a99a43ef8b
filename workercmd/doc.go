// Package workercmd is the worker daemon's command, `mwp-worker run`, for
// Go programs that embed their own handlers: Main(handlers...) gives such a
// program every flag, environment variable, signal, exit status and log
// line of run (examples/go-handler). cmd/mwp-worker's run is Command of
// this package; the operator's flags and endpoints every long-running
// command shares (OpsFlags, NewLogger, StartOps) and the exit after a
// failed authority write live here too.
package workercmd
