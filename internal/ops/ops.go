// Package ops serves what an operator's tools read from a long-running
// mwp-worker process on one HTTP listener: Prometheus metrics (/metrics),
// liveness (/healthz), readiness (/readyz) and, when asked for, the Go
// profiler (/debug/pprof/). docs/operations.md lists the metrics.
package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Checks answer /healthz and /readyz: nil is 200 "ok", an error is 503
// with its text. A nil check always passes.
type Checks struct {
	// Live: the process can do its job at all (its store is writable).
	Live func() error
	// Ready: it is doing its job now (connected and caught up; listening).
	Ready func() error
}

// Config is what one listener serves.
type Config struct {
	Gatherer prometheus.Gatherer
	Checks   Checks
	// Pprof adds /debug/pprof/ (off by default: it exposes internals).
	Pprof bool
}

// NewRegistry is a registry with the Go runtime and process collectors,
// which every operator dashboard expects beside ours.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves cfg's endpoints.
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	mux.HandleFunc("GET /healthz", check(cfg.Checks.Live))
	mux.HandleFunc("GET /readyz", check(cfg.Checks.Ready))
	if cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func check(f func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if f != nil {
			if err := f(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}
}

// Listen binds addr; Serve then serves on it until ctx ends.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ops: listen %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then shuts down within a second.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
}
