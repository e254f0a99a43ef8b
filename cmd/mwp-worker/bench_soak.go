package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/missionweave/mwp-worker/internal/bench"
	"github.com/urfave/cli/v3"
)

// soak is `bench --duration`: items at a steady rate over Missions in
// turn, the resources read every interval.
func soak(ctx context.Context, cmd *cli.Command) error {
	for _, f := range []string{"items", "lanes"} {
		if cmd.IsSet(f) {
			return usagef(cmd, "--%s is for a run of a fixed number of items; a soak (--duration) starts --rate items a second", f)
		}
	}
	d := cmd.Duration("duration")
	warmup := d / 5
	if cmd.IsSet("warmup") {
		warmup = cmd.Duration("warmup")
	}
	tune, err := benchTuning(cmd)
	if err != nil {
		return err
	}
	cfg := bench.SoakConfig{Tune: tune, Duration: d, Rate: cmd.Float("rate"), ItemsPerGroup: int(cmd.Int("items-per-group")), Groups: int(cmd.Int("groups")),
		Workers: int(cmd.Int("workers")), Slots: int(cmd.Int("slots")), Fsync: cmd.Bool("fsync"), Dir: cmd.String("dir"),
		ItemTimeout: cmd.Duration("item-timeout"), Interval: cmd.Duration("interval"), Warmup: warmup,
		HeapProfileDir: cmd.String("heap-profile")}
	remote, err := benchRemote(cmd)
	if err != nil {
		return err
	}
	if remote != nil {
		cfg.Remote = remote
		if !cmd.IsSet("workers") {
			cfg.Workers = len(remote.Workers)
		}
	}
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	w := cmd.Root().Writer
	var first *bench.Sample
	var werr error
	cfg.OnSample = func(s bench.Sample) {
		if first == nil {
			first = &s
		}
		if cmd.Bool("json") {
			if err := json.NewEncoder(w).Encode(s); err != nil && werr == nil {
				werr = err
			}
			return
		}
		printSoakLine(w, s)
		if s.Kind == "final" {
			printSoakEnd(w, *first, s)
		}
	}
	// SIGINT or SIGTERM stops the run (exit 1) and removes its temporary stores.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := bench.Soak(ctx, cfg); err != nil {
		return fmt.Errorf("bench: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return werr
}

// printSoakLine prints one reading on one line.
func printSoakLine(w io.Writer, s bench.Sample) {
	it, p, a := s.Items, s.Process, s.Authority
	fmt.Fprintf(w, "%7.0fs %-8s items %d started, %d verified, %d in flight, late ≤ %.0f ms, end to end p50 %.0f p99 %.0f ms | missions %d approved, %d open",
		s.Seconds, s.Kind, it.Started, it.Completed, it.InFlight, it.MaxLateMs, it.EndToEndMs.P50, it.EndToEndMs.P99, s.Groups.Finished, s.Groups.Open)
	fmt.Fprintf(w, " | process heap %s, rss %s, %d goroutines, %d files", bytesOf(float64(p.HeapInuseBytes)), bytesOf(float64(p.RSSBytes)), p.Goroutines, p.OpenFiles)
	fmt.Fprintf(w, " | authority")
	if a.Source == "metrics" {
		fmt.Fprintf(w, " heap %s, rss %s, files %s,", optBytes(a.HeapInuseBytes), optBytes(a.RSSBytes), optCount(a.OpenFiles))
	}
	fmt.Fprintf(w, " %s goroutines, %s events", optCount(a.Goroutines), optCount(a.LogEvents))
	if a.Store != nil {
		fmt.Fprintf(w, ", store %s", storeLine(*a.Store))
	}
	fmt.Fprintf(w, " | %d workers %d goroutines, store %s\n", s.Workers.Count, s.Workers.Goroutines, storeLine(s.Workers.Store))
}

func storeLine(st bench.Store) string {
	var dirs []string
	for _, k := range slices.Sorted(maps.Keys(st.Dirs)) {
		dirs = append(dirs, k+" "+bytesOf(float64(st.Dirs[k])))
	}
	return fmt.Sprintf("db %s (%s used), %s, total %s", bytesOf(float64(st.DBFileBytes)), bytesOf(float64(st.DBUsedBytes)), strings.Join(dirs, ", "), bytesOf(float64(st.TotalBytes)))
}

// printSoakEnd prints the growth of every reading, first to last.
func printSoakEnd(w io.Writer, first, last bench.Sample) {
	g := last.Growth
	if g == nil {
		return
	}
	fmt.Fprintf(w, "soak: %.0fs, %d items verified, %d missions approved; growth after %.0fs of warm-up over %d readings:\n",
		last.Seconds, last.Items.Completed, last.Groups.Finished, g.WarmupSeconds, g.Samples)
	from, to := bench.Readings(first), bench.Readings(last)
	fmt.Fprintf(w, "  %-36s %12s %12s %14s %12s %16s\n", "reading", "start", "end", "per hour", "per item", "warm-up per hour")
	for _, k := range slices.Sorted(maps.Keys(to)) {
		if k == "items.completed" || k == "groups.finished" {
			continue
		}
		slopes := func(m map[string]float64) string {
			if v, ok := m[k]; ok {
				return valueOf(k, v)
			}
			return "-"
		}
		fmt.Fprintf(w, "  %-36s %12s %12s %14s %12s %16s\n", k, valueOf(k, from[k]), valueOf(k, to[k]), slopes(g.PerHour), slopes(g.PerItem), slopes(g.WarmupPerHour))
	}
	for _, n := range last.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// valueOf formats reading k's value v: bytes for a size, else a count.
func valueOf(k string, v float64) string {
	if strings.HasSuffix(k, "Bytes") || strings.Contains(k, ".dirs.") {
		return bytesOf(v)
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func bytesOf(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func optBytes(v *float64) string {
	if v == nil {
		return "?"
	}
	return bytesOf(*v)
}

func optCount(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("%.0f", *v)
}
