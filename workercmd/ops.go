package workercmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/internal/ops"
)

// OpsFlags are the operator's flags of every long-running command: logs
// and the metrics/health endpoints.
func OpsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: "info", Sources: cli.EnvVars("MWP_LOG_LEVEL")},
		&cli.StringFlag{Name: "log-format", Usage: "text (logfmt) or json (one object per line)", Value: "text", Sources: cli.EnvVars("MWP_LOG_FORMAT")},
		&cli.StringFlag{Name: "metrics-listen", Usage: "serve /metrics, /healthz and /readyz over HTTP on `ADDR` (e.g. 127.0.0.1:9464); off when empty", Sources: cli.EnvVars("MWP_METRICS_LISTEN")},
		&cli.BoolFlag{Name: "pprof", Usage: "also serve /debug/pprof/ on --metrics-listen", Sources: cli.EnvVars("MWP_PPROF")},
	}
}

// NewLogger is the process's logger on w, as --log-level and --log-format say.
func NewLogger(cmd *cli.Command, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cmd.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", cmd.String("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f := cmd.String("log-format"); f {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		opts.ReplaceAttr = jsonAttr
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f)
	}
}

// StartOps serves the operator endpoints when --metrics-listen is set,
// until ctx ends; it prints `metrics listening on http://ADDR/metrics`.
func StartOps(ctx context.Context, cmd *cli.Command, out io.Writer, log *slog.Logger, cols []prometheus.Collector, checks ops.Checks) error {
	addr := cmd.String("metrics-listen")
	if addr == "" {
		return nil
	}
	reg := ops.NewRegistry()
	for _, c := range cols {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	ln, err := ops.Listen(addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "metrics listening on http://%s/metrics\n", ln.Addr())
	go ops.Serve(ctx, ln, ops.Handler(ops.Config{Gatherer: reg, Checks: checks, Pprof: cmd.Bool("pprof")}), log)
	return nil
}
