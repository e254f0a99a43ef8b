package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/internal/ops"
)

// opsFlags are the operator endpoints' flags of every long-running command.
func opsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-listen", Usage: "serve /metrics, /healthz and /readyz over HTTP on `ADDR` (e.g. 127.0.0.1:9464); off when empty", Sources: cli.EnvVars("MWP_METRICS_LISTEN")},
		&cli.BoolFlag{Name: "pprof", Usage: "also serve /debug/pprof/ on --metrics-listen", Sources: cli.EnvVars("MWP_PPROF")},
	}
}

// startOps serves the operator endpoints when --metrics-listen is set,
// until ctx ends; it prints `metrics listening on http://ADDR/metrics`.
func startOps(ctx context.Context, cmd *cli.Command, out io.Writer, log *slog.Logger, cols []prometheus.Collector, checks ops.Checks) error {
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
