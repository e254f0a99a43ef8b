package workercmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

// tuningFlags are run's knobs beyond the connection: every setting a Go
// embedder has in runtime.WorkerConfig that an operator may need
// (docs/operations.md lists them with their defaults).
func tuningFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "drain-timeout", Usage: "how long a shutdown waits for slots to reach a safe point and their checkpoints to be sent", Value: 30 * time.Second, Sources: cli.EnvVars("MWP_DRAIN_TIMEOUT")},
		&cli.DurationFlag{Name: "preempt-timeout", Usage: "how long a preemption request waits for a safe point before it is recorded as refused (the run is never interrupted for it), and how long a cancelled run may take to stop", Value: slots.DefaultPreemptTimeout, Sources: cli.EnvVars("MWP_PREEMPT_TIMEOUT")},
		&cli.StringSliceFlag{Name: "group-weight", Usage: "a Group's scheduler weight, `GROUP=N` (repeatable or comma-separated; default 1, scaled by the Mission's priority class)", Sources: cli.EnvVars("MWP_GROUP_WEIGHTS")},
		&cli.StringSliceFlag{Name: "group-quota", Usage: "the most slots a Group may hold at once, `GROUP=N` (repeatable or comma-separated; default none)", Sources: cli.EnvVars("MWP_GROUP_QUOTAS")},
		&cli.IntFlag{Name: "queue-depth", Usage: "accepted, unfinished items admission control takes per slot", Value: 4, Sources: cli.EnvVars("MWP_QUEUE_DEPTH")},
		&cli.DurationFlag{Name: "estimate", Usage: "expected run time of an item, for admission and schedule disclosure, until runs are observed", Value: time.Minute, Sources: cli.EnvVars("MWP_ESTIMATE")},
		&cli.DurationFlag{Name: "offline-grace", Usage: "how long reversible work keeps running while the authority is unreachable", Value: offline.DefaultGrace, Sources: cli.EnvVars("MWP_OFFLINE_GRACE")},
		&cli.IntFlag{Name: "offline-buffer-commands", Usage: "the most signed commands buffered while offline", Value: offline.DefaultMaxCommands, Sources: cli.EnvVars("MWP_OFFLINE_BUFFER_COMMANDS")},
		&cli.StringSliceFlag{Name: "extension", Usage: "an extension profile `URI` this worker's handlers interpret; an offer that depends on another critical extension is refused (repeatable or comma-separated)", Sources: cli.EnvVars("MWP_EXTENSIONS")},
		&cli.StringFlag{Name: "artifact-classification", Usage: "the least data classification of the artifacts this worker publishes: public, internal, confidential or restricted (a handler may name a more restricted one)", Value: string(protocol.ClassInternal), Sources: cli.EnvVars("MWP_ARTIFACT_CLASSIFICATION")},
		&cli.DurationFlag{Name: "forget-grace", Usage: "how long a Group whose Mission ended, holding nothing of this worker, is kept before the worker forgets it (its store, checkpoints and tool ledger; docs/operations.md); 0: never", Value: runtime.DefaultForgetGrace, Sources: cli.EnvVars("MWP_FORGET_GRACE")},
		costFlag(),
		limitFlag(),
		&cli.Int64Flag{Name: "offline-buffer-bytes", Usage: "the most bytes of signed commands buffered while offline", Value: offline.DefaultMaxBytes, Sources: cli.EnvVars("MWP_OFFLINE_BUFFER_BYTES")},
	}
}

// costFlag and limitFlag are the worker's admission budgets, the same on
// run and up.
func costFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "cost", Usage: "the expected cost of one run of a capability, `CAP:DIM=N`, DIM money, tokens, toolCalls, computeSeconds or sideEffects (wall-clock is --estimate's): admission refuses an offer whose contract budget does not cover it (repeatable or comma-separated; default 0)", Sources: cli.EnvVars("MWP_COSTS")}
}

func limitFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "limit", Usage: "the most the accepted, unfinished items may hold at once, `DIM=N`, DIM money, tokens, toolCalls, computeSeconds, wallClockSeconds or sideEffects: admission refuses an offer that would pass it (repeatable or comma-separated; default no limit)", Sources: cli.EnvVars("MWP_LIMITS")}
}

// budgetsFrom reads --cost and --limit.
func budgetsFrom(cmd *cli.Command) (map[string]protocol.Budgets, protocol.Budgets, error) {
	costs, err := parseCosts(splitList(cmd.StringSlice("cost"), "\n,"))
	if err != nil {
		return nil, protocol.Budgets{}, err
	}
	limits, err := parseLimits(splitList(cmd.StringSlice("limit"), "\n,"))
	return costs, limits, err
}

// tuning is what tuningFlags said, checked.
type tuning struct {
	drain, preempt, estimate, grace time.Duration
	forget                          time.Duration // 0: never
	weights                         map[string]int64
	quotas                          map[string]int
	depth, bufCommands              int
	bufBytes                        int64
	class                           protocol.Classification
	extensions                      []string
	costs                           map[string]protocol.Budgets
	limits                          protocol.Budgets
}

func tuningFrom(cmd *cli.Command) (tuning, error) {
	t := tuning{
		drain: cmd.Duration("drain-timeout"), preempt: cmd.Duration("preempt-timeout"), estimate: cmd.Duration("estimate"),
		grace: cmd.Duration("offline-grace"), forget: cmd.Duration("forget-grace"), depth: int(cmd.Int("queue-depth")),
		bufCommands: int(cmd.Int("offline-buffer-commands")), bufBytes: cmd.Int64("offline-buffer-bytes"),
		class:      protocol.Classification(cmd.String("artifact-classification")),
		extensions: splitList(cmd.StringSlice("extension"), "\n,"),
	}
	if t.class.Rank() == 0 {
		return t, fmt.Errorf("--artifact-classification %q: want public, internal, confidential or restricted", t.class)
	}
	for name, d := range map[string]time.Duration{"drain-timeout": t.drain, "preempt-timeout": t.preempt, "estimate": t.estimate, "offline-grace": t.grace} {
		if d <= 0 {
			return t, fmt.Errorf("--%s %v: want a positive duration", name, d)
		}
	}
	if t.forget < 0 {
		return t, fmt.Errorf("--forget-grace %v: want a duration, 0 for never", t.forget)
	}
	if t.grace > offline.MaxGrace {
		return t, fmt.Errorf("--offline-grace %v: at most %v", t.grace, offline.MaxGrace)
	}
	for name, n := range map[string]int64{"queue-depth": int64(t.depth), "offline-buffer-commands": int64(t.bufCommands), "offline-buffer-bytes": t.bufBytes} {
		if n <= 0 {
			return t, fmt.Errorf("--%s %d: want a positive number", name, n)
		}
	}
	weights, err := groupNumbers("group-weight", splitList(cmd.StringSlice("group-weight"), "\n,"))
	if err != nil {
		return t, err
	}
	quotas, err := groupNumbers("group-quota", splitList(cmd.StringSlice("group-quota"), "\n,"))
	if err != nil {
		return t, err
	}
	if t.costs, t.limits, err = budgetsFrom(cmd); err != nil {
		return t, err
	}
	t.weights = weights
	t.quotas = map[string]int{}
	for g, n := range quotas {
		t.quotas[g] = int(n)
	}
	return t, nil
}

// groupNumbers parses GROUP=N pairs, N a positive integer, each Group once.
func groupNumbers(flag string, pairs []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, p := range pairs {
		g, v, ok := strings.Cut(p, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || g == "" || err != nil || n <= 0 || n > 1<<20 {
			return nil, fmt.Errorf("--%s %q: want GROUP=N, N a positive integer up to %d", flag, p, 1<<20)
		}
		if _, dup := out[g]; dup {
			return nil, fmt.Errorf("--%s: Group %s given twice", flag, g)
		}
		out[g] = n
	}
	return out, nil
}

func (t tuning) apply(cfg *runtime.WorkerConfig) {
	cfg.DrainTimeout, cfg.PreemptTimeout, cfg.Estimate, cfg.OfflineGrace = t.drain, t.preempt, t.estimate, t.grace
	cfg.QueueDepth, cfg.Classification, cfg.Extensions = t.depth, t.class, t.extensions
	cfg.OfflineLimits = offline.Limits{MaxCommands: t.bufCommands, MaxBytes: t.bufBytes}
	cfg.GroupWeights, cfg.GroupQuotas = t.weights, t.quotas
	cfg.ForgetGrace = t.forget
	cfg.Costs, cfg.Limits = t.costs, t.limits
	if t.forget == 0 {
		cfg.ForgetGrace = -1 // never
	}
}
