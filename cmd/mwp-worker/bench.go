package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/internal/bench"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/urfave/cli/v3"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name: "bench",
		// --worker-key names files: a comma is part of a path, not a separator.
		DisableSliceFlagSeparator: true,
		Usage:                     "drive no-op WorkItems end to end through an authority (embedded, or a running one) and in-process workers over wss, and measure them",
		Description: "Starts authority-lite in this process and --workers workers (the real runtime, each with its own store, over\n" +
			"wss with the certificate pinned), and drives --items no-op WorkItems from --lanes closed-loop lanes: authorize,\n" +
			"offer, accept, start, the handler, submit, accept_result. Prints items/s, latency percentiles per phase,\n" +
			"fdatasyncs, bytes written and CPU per item, and the Ed25519 floor of the same commands and events measured\n" +
			"right after. Any item not verified fails the run (exit 1). docs/performance.md explains the figures.\n\n" +
			"With --authority it targets that running authority instead, as the human of --owner-key (who creates one new\n" +
			"Mission per Group), the coordinator agent of --coordinator-key and one worker per --worker-key, all of whom it\n" +
			"must know already (docs/operations.md, \"Adding an agent\"); stores, bytes and CPU are then this process's only.\n\n" +
			"With --duration it soaks instead: it starts --rate items a second on a fixed schedule (open loop: a slowdown shows as\n" +
			"items in flight, lateness and latency) over Missions of --items-per-group items in turn, --groups at once, each in a\n" +
			"Group of its own that is submitted and approved once its items are verified, and every --interval prints the heap,\n" +
			"goroutines, open files and store sizes of the authority and the workers; at the end their growth per hour after\n" +
			"--warmup and per item (docs/operations.md, \"Soak\").",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "items", Usage: "WorkItems to drive to verified", Value: 1000},
			&cli.IntFlag{Name: "lanes", Usage: "items in flight at once (each lane starts its next item when the last is verified)", Value: 8},
			&cli.IntFlag{Name: "workers", Usage: "workers, each with its own store and connection", Value: 1},
			&cli.IntFlag{Name: "groups", Usage: "Groups (one Mission each) the items are spread over; every worker is in all", Value: 1},
			&cli.IntFlag{Name: "slots", Usage: "execution slots per worker", Value: 8},
			&cli.BoolFlag{Name: "fsync", Usage: "fsync every store (false: NoSync, to see what durability costs)", Value: true},
			&cli.StringFlag{Name: "dir", Usage: "keep the stores in `DIR` (default: a temporary directory, removed after)"},
			&cli.DurationFlag{Name: "item-timeout", Usage: "longest one item may take from authorize to verified", Value: bench.DefaultItemTimeout},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (docs/shapes.md)"},
			&cli.StringFlag{Name: "authority", Usage: "target the running authority at wss://HOST:PORT/mwp instead of starting one"},
			&cli.StringFlag{Name: "authority-fingerprint", Usage: "with --authority: pin its certificate, sha256:<64 hex>"},
			&cli.StringFlag{Name: "authority-ca", Usage: "with --authority: PEM `FILE` of CA certificates to trust for it"},
			&cli.StringFlag{Name: "authority-key", Usage: "with --authority: its public key `FILE` (DIR/authority.pub), to verify events"},
			&cli.BoolFlag{Name: "insecure-loopback", Usage: "with --authority: allow ws:// to a loopback authority (tests only)"},
			&cli.StringFlag{Name: "owner-key", Usage: "with --authority: private key `FILE` of a human it knows, who creates the run's Missions"},
			&cli.StringFlag{Name: "coordinator-key", Usage: "with --authority: private key `FILE` of an enrolled agent whose card declares the coordinator role"},
			&cli.StringSliceFlag{Name: "worker-key", Usage: "with --authority: private key `FILE` of an enrolled agent, one per worker (repeatable)"},
			&cli.DurationFlag{Name: "duration", Usage: "soak: start items for this long, reading resources every --interval (instead of --items and --lanes)"},
			&cli.FloatFlag{Name: "rate", Usage: "soak: items started a second, on a fixed schedule", Value: 4},
			&cli.IntFlag{Name: "items-per-group", Usage: "soak: WorkItems of each Mission (its Group is finished, and a new one opened, after them)", Value: 100},
			&cli.DurationFlag{Name: "interval", Usage: "soak: how often resources are read and printed", Value: 10 * time.Second},
			&cli.DurationFlag{Name: "warmup", Usage: "soak: left out of the growth per hour", DefaultText: "a fifth of --duration"},
			&cli.IntFlag{Name: "retain-events", Usage: "the embedded authority's retention, as authority serve's (0: every event kept)"},
			&cli.DurationFlag{Name: "archive-after", Usage: "the embedded authority archives a finished Group once its last event is this old, as authority serve's (0: never)"},
			&cli.DurationFlag{Name: "purge-after", Usage: "the embedded authority deletes an archived Group this long after its archive, as authority serve's (0: never; needs --archive-after)"},
			&cli.DurationFlag{Name: "forget-grace", Usage: "each worker forgets a finished Group after this grace, as run's (0: never)", Value: runtime.DefaultForgetGrace},
			&cli.StringFlag{Name: "heap-profile", Usage: "soak: write a heap profile (after a forced collection) to `DIR`/heap-<n>-<seconds>s.pb.gz with every reading, to diff with go tool pprof -base"},
			&cli.StringFlag{Name: "authority-metrics", Usage: "soak with --authority: `URL` of its /metrics (authority serve --metrics-listen), to read its heap, goroutines and files"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.IsSet("duration") {
				return soak(ctx, cmd)
			}
			for _, f := range []string{"rate", "items-per-group", "interval", "warmup", "authority-metrics", "heap-profile"} {
				if cmd.IsSet(f) {
					return usagef(cmd, "--%s is only for a soak (--duration)", f)
				}
			}
			tune, err := benchTuning(cmd)
			if err != nil {
				return err
			}
			cfg := bench.Config{Items: int(cmd.Int("items")), Lanes: int(cmd.Int("lanes")), Workers: int(cmd.Int("workers")),
				Groups: int(cmd.Int("groups")), Slots: int(cmd.Int("slots")), Fsync: cmd.Bool("fsync"), Dir: cmd.String("dir"),
				ItemTimeout: cmd.Duration("item-timeout"), Tune: tune}
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
			// SIGINT or SIGTERM stops the run (exit 1) and removes its temporary stores.
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				// One line, even for joined errors (a failure and then the shutdown's).
				return fmt.Errorf("bench: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			if cmd.Bool("json") {
				enc := json.NewEncoder(cmd.Root().Writer)
				return enc.Encode(res)
			}
			printBench(cmd.Root().Writer, res)
			return nil
		},
	}
}

// benchRemote reads the --authority flags: nil without --authority, a
// usage error for one of them given without it or a key that is not its
// principal's.
func benchRemote(cmd *cli.Command) (*bench.Remote, error) {
	if cmd.String("authority") == "" {
		for _, f := range []string{"authority-fingerprint", "authority-ca", "authority-key", "insecure-loopback", "owner-key", "coordinator-key", "worker-key", "authority-metrics"} {
			if cmd.IsSet(f) {
				return nil, usagef(cmd, "--%s is only for a run against a running authority (--authority)", f)
			}
		}
		return nil, nil
	}
	for _, f := range []string{"authority-key", "owner-key", "coordinator-key", "worker-key"} {
		if !cmd.IsSet(f) {
			return nil, usagef(cmd, "--authority needs --%s", f)
		}
	}
	identity := func(flag, path string, kind protocol.ActorKind) (bench.Identity, error) {
		k, who, err := principalKey(cmd, flag, path, kind)
		return bench.Identity{Actor: who, Key: k}, err
	}
	apub, err := protocol.LoadPublicKey(cmd.String("authority-key"))
	if err != nil {
		return nil, usagef(cmd, "--authority-key: %v", err)
	}
	r := &bench.Remote{URL: cmd.String("authority"), AllowInsecureLoopback: cmd.Bool("insecure-loopback"),
		Trust:         remote.Trust{Pin: cmd.String("authority-fingerprint"), CAFile: cmd.String("authority-ca")},
		AuthorityKeys: protocol.NewKeySet(apub), Metrics: cmd.String("authority-metrics")}
	if r.Owner, err = identity("owner-key", cmd.String("owner-key"), protocol.ActorHuman); err != nil {
		return nil, err
	}
	if r.Coordinator, err = identity("coordinator-key", cmd.String("coordinator-key"), protocol.ActorAgent); err != nil {
		return nil, err
	}
	for _, path := range cmd.StringSlice("worker-key") {
		w, err := identity("worker-key", path, protocol.ActorAgent)
		if err != nil {
			return nil, err
		}
		r.Workers = append(r.Workers, w)
	}
	return r, nil
}

func printBench(w io.Writer, r *bench.Result) {
	if r.Authority != "embedded" {
		fmt.Fprintf(w, "authority %s (running; not measured here: its stores, bytes and CPU)\n", r.Authority)
	}
	fmt.Fprintf(w, "%d items, %d lanes, %d workers × %d slots, %d groups, fsync %v: %.1fs, %.1f items/s\n",
		r.Items, r.Lanes, r.Workers, r.Slots, r.Groups, r.Fsync, r.Seconds, r.ItemsPerSecond)
	fmt.Fprintf(w, "latency ms           %8s %8s %8s %8s\n", "p50", "p90", "p99", "max")
	for _, p := range []struct {
		name string
		l    bench.Latency
	}{{"offer→accepted", r.Latency.OfferToAccepted}, {"accepted→started", r.Latency.AcceptedToStarted},
		{"started→submitted", r.Latency.StartedToSubmitted}, {"submitted→verified", r.Latency.SubmittedToVerified}, {"end to end", r.Latency.EndToEnd}} {
		fmt.Fprintf(w, "  %-18s %8.2f %8.2f %8.2f %8.2f\n", p.name, p.l.P50, p.l.P90, p.l.P99, p.l.Max)
	}
	fmt.Fprintf(w, "per item: %.2f commands, %.2f events, %.2f fdatasyncs, %.0f bytes written, %.2f ms CPU\n",
		r.PerItem.Commands, r.PerItem.Events, r.PerItem.Fdatasyncs, r.PerItem.BytesWritten, r.PerItem.CPUMs)
	fmt.Fprintf(w, "  fdatasyncs: 2 per committed bbolt transaction (meta txid of each store, before and after) + %d file growths seen\n", r.Totals.FileGrowths)
	for _, f := range slices.Sorted(maps.Keys(r.Totals.Commits)) {
		fmt.Fprintf(w, "    %s: %d commits (%.2f per item)\n", f, r.Totals.Commits[f], float64(r.Totals.Commits[f])/float64(r.Items))
	}
	fmt.Fprintf(w, "  bytes written: /proc/self/io write_bytes of this process (every store: pages, meta and growth)\n")
	if r.Authority == "embedded" {
		fmt.Fprintf(w, "  CPU: user + system of the whole process (authority, workers, driver)\n")
	} else {
		fmt.Fprintf(w, "  CPU: user + system of the whole process (workers, driver)\n")
	}
	if r.Totals.RateLimited > 0 {
		fmt.Fprintf(w, "rate limited: %d requests answered RATE_LIMITED and waited out, %.1fs in all (the authority's limits: docs/operations.md)\n",
			r.Totals.RateLimited, r.Totals.RateLimitedSeconds)
	}
	if len(r.Totals.Refused) > 0 {
		fmt.Fprintf(w, "refused commands: %v\n", r.Totals.Refused)
	}
	f := r.Floor
	fmt.Fprintf(w, "crypto floor: %.1f signs and %.1f verifies per item of %d-byte messages, measured now on %d cores\n",
		f.SignsPerItem, f.VerifiesPerItem, f.MessageBytes, f.Cores)
	fmt.Fprintf(w, "  wall: sign %.1f µs, verify %.1f µs per core → %.0f µs per item, %.0f items/s; measured throughput is %.3f× the floor\n",
		f.SignUs, f.VerifyUs, f.PerItemUs, f.ItemsPerSecond, f.Ratio)
	fmt.Fprintf(w, "  CPU:  sign %.1f µs, verify %.1f µs → %.0f µs per item, %.1f%% of the CPU the run spent per item\n",
		f.SignCPUUs, f.VerifyCPUUs, f.PerItemCPUUs, 100*f.CPUShare)
	fmt.Fprintf(w, "load average %.2f %.2f %.2f\n", r.LoadAverage[0], r.LoadAverage[1], r.LoadAverage[2])
}

// benchTuning reads the retention, archive, purge and forget flags: the
// embedded authority's are refused with --authority (set them on that
// authority's serve), --forget-grace applies to the workers either way.
func benchTuning(cmd *cli.Command) (*bench.Tuning, error) {
	for _, f := range []string{"retain-events", "archive-after", "purge-after"} {
		if cmd.IsSet(f) && cmd.String("authority") != "" {
			return nil, usagef(cmd, "--%s tunes the embedded authority; a running one (--authority) has its own (authority serve --%s)", f, f)
		}
	}
	retain, archive, purge, forget := cmd.Int("retain-events"), cmd.Duration("archive-after"), cmd.Duration("purge-after"), cmd.Duration("forget-grace")
	switch {
	case retain < 0 || archive < 0 || purge < 0 || forget < 0:
		return nil, fmt.Errorf("bench: --retain-events, --archive-after, --purge-after and --forget-grace must not be negative")
	case purge > 0 && archive == 0:
		return nil, fmt.Errorf("bench: --purge-after deletes archived Groups: it needs --archive-after")
	}
	if forget == 0 {
		forget = -1 // run's 0 is never; the runtime's is its default
	}
	return &bench.Tuning{
		Authority: func(c *embed.Config) {
			c.RetainEvents, c.ArchiveAfter, c.PurgeAfter = uint64(retain), archive, purge
		},
		Worker: func(c *runtime.WorkerConfig) { c.ForgetGrace = forget },
	}, nil
}
