package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	plancoord "github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/workercmd"
)

// The coordinator as its own long-running agent on a remote authority: the
// same package `up` runs in process, reaching the authority over its HTTPS
// routes (package remote).

func coordinatorCommand() *cli.Command {
	return &cli.Command{
		Name:  "coordinator",
		Usage: "a plan's coordinator as its own agent on a remote authority",
		Commands: []*cli.Command{{
			Name:                      "run",
			DisableSliceFlagSeparator: true,
			Usage:                     "coordinate the Missions of PLAN...: authorize, offer, review and submit each for approval",
			ArgsUsage:                 "PLAN...",
			Description: "Connects to --authority as the agent of --key (enrolled with the coordinator role, e.g. by\n" +
				"`authority enroll`), opens its next session and waits until each plan's Mission exists and names\n" +
				"this agent its coordinator (`mission start PLAN --coordinator AGENT`). It then adds the --worker\n" +
				"agents as members, authorizes and offers the stages, reviews each submission (spec 13.2: integrity,\n" +
				"the plan's checks, the reviewer stage's verdict), retries per the plan and submits the Mission for\n" +
				"approval. Several PLANs (each its own Mission and Group) are coordinated at once on the agent's one\n" +
				"session; a second process of the same agent would open a newer session and end this one's work\n" +
				"(AUTH_STALE_SESSION). Prints `mission ID STATE` as each Mission ends. Exit 0 once every Mission\n" +
				"is approved; 1 when one is cancelled or terminated, when this agent is replaced as its coordinator\n" +
				"(AUTH_STALE_COORDINATOR) or on any other failure, one line on stderr per Mission. Stopped by\n" +
				"SIGINT/SIGTERM, it exits 1; started again with the same plans it resumes from the logs without\n" +
				"repeating a step.",
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "key", Usage: "the coordinator agent's private key file (key id agent:ID#NAME)", Required: true, Sources: cli.EnvVars("MWP_KEY")},
				&cli.StringSliceFlag{Name: "worker", Usage: "a candidate worker agent id (repeatable, or comma-separated)", Required: true, Sources: cli.EnvVars("MWP_WORKERS")},
				&cli.DurationFlag{Name: "lease", Usage: "the coordinator lease it renews at half-life", Value: 10 * time.Minute, Sources: cli.EnvVars("MWP_COORDINATOR_LEASE")},
				&cli.DurationFlag{Name: "offer-ttl", Usage: "how long an offer stands", Value: time.Minute, Sources: cli.EnvVars("MWP_OFFER_TTL")},
				&cli.IntFlag{Name: "max-candidates", Usage: "bound of an urgent item's candidate set", Value: 3, Sources: cli.EnvVars("MWP_MAX_CANDIDATES")},
				workercmd.InputFlag(),
			}, append(requiring(remoteFlags(), "authority-key"), opsFlags()...)...),
			Action: coordinatorRun,
		}, coordinatorEnrollmentCommand()},
	}
}

// coordinatorEnrollmentCommand writes a coordinator agent's enrollment
// document, as `run --enrollment` does a worker's: the authority must
// know an agent before it can act (docs/wire.md, "Agent bootstrap").
func coordinatorEnrollmentCommand() *cli.Command {
	return &cli.Command{
		Name:  "enrollment",
		Usage: "write a coordinator agent's signed first Agent Card, for authority enroll or serve --enroll",
		Description: "Writes to --out the agent_card_register of the agent of --key, its card declaring the coordinator\n" +
			"role, signed with that key and acceptable to the authority for --enrollment-valid. Register it with\n" +
			"`mwp-worker authority enroll FILE` (or `authority serve --enroll FILE`); then `coordinator run` and\n" +
			"`bench --coordinator-key` can act as that agent.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "the coordinator agent's private key `FILE` (key id agent:ID#NAME)", Required: true, Sources: cli.EnvVars("MWP_KEY")},
			&cli.StringFlag{Name: "out", Usage: "write the enrollment document to `FILE`", Required: true},
			&cli.DurationFlag{Name: "enrollment-valid", Usage: "how long the document stays acceptable to the authority (at most 24h)", Value: protocol.DefaultEnrollmentValidity, Sources: cli.EnvVars("MWP_ENROLLMENT_VALID")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			key, me, err := principalKey(cmd, "key", cmd.String("key"), protocol.ActorAgent)
			if err != nil {
				return err
			}
			valid := cmd.Duration("enrollment-valid")
			now := time.Now()
			raw, err := protocol.Enrollment(plancoord.Card(me.ID), key, now, valid)
			if protocol.CodeOf(err) == protocol.CodeInvalidCommand {
				return usagef(cmd, "--enrollment-valid %s: %v", valid, err)
			}
			if err != nil {
				return fmt.Errorf("coordinator enrollment: %w", err)
			}
			if err := os.WriteFile(cmd.String("out"), append(raw, '\n'), 0o644); err != nil {
				return fmt.Errorf("coordinator enrollment: %w", err)
			}
			fmt.Fprintf(cmd.Root().Writer, "enrollment of %s written to %s, valid until %s\n", me.ID, cmd.String("out"), protocol.NewTime(now.Add(valid)))
			return nil
		},
	}
}

// remoteFlags reach the authority; the same as the mission commands' but
// for the key, which is an agent's here.
func remoteFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range authorityFlags() {
		if f.Names()[0] != "owner-key" {
			out = append(out, f)
		}
	}
	return out
}

func coordinatorRun(ctx context.Context, cmd *cli.Command) error {
	stderr := &syncWriter{W: cmd.Root().ErrWriter}
	fail := func(prefix string, err error) error {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			workercmd.FailLine(cmd, stderr, fmt.Sprintf("coordinator run: %s%s: %s", prefix, pe.Code, oneLine(pe.Message)))
		} else {
			workercmd.FailLine(cmd, stderr, fmt.Sprintf("coordinator run: %s%s", prefix, oneLine(err.Error())))
		}
		return exitError{1}
	}
	given, err := workercmd.InputFlags(cmd.StringSlice("input"))
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	used := map[string]bool{}
	var plans []*plan.Plan
	inputs := map[*plan.Plan][]plancoord.Input{}
	missions, groups := map[string]string{}, map[string]string{}
	for _, name := range cmd.Args().Slice() {
		raw, err := os.ReadFile(name)
		if err != nil {
			return fail("", err)
		}
		p, err := plan.Parse(name, raw)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
		if other, dup := missions[p.Mission.ID]; dup {
			return usagef(cmd, "%s and %s both name Mission %s", other, name, p.Mission.ID)
		}
		if other, dup := groups[p.Mission.GroupID]; dup {
			return usagef(cmd, "%s and %s both name Group %s", other, name, p.Mission.GroupID)
		}
		missions[p.Mission.ID], groups[p.Mission.GroupID] = name, name
		plans = append(plans, p)
		// Each plan takes the --input values it names.
		mine := map[string]string{}
		for _, in := range p.Inputs {
			if path, ok := given[in.Name]; ok {
				mine[in.Name], used[in.Name] = path, true
			}
		}
		if inputs[p], err = workercmd.BindInputs(p, mine); err != nil {
			return fail("", err)
		}
	}
	for name := range given {
		if !used[name] {
			return usagef(cmd, "--input %s: no plan names an input %q", name, name)
		}
	}
	key, me, err := principalKey(cmd, "key", cmd.String("key"), protocol.ActorAgent)
	if err != nil {
		return err
	}
	if cmd.String("authority-key") == "" {
		return usagef(cmd, "--authority-key is required: events are read only once their signatures are verified")
	}
	apub, err := protocol.LoadPublicKey(cmd.String("authority-key"))
	if err != nil {
		return usagef(cmd, "--authority-key: %v", err)
	}
	log, err := newLogger(cmd, stderr)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var reach reachability
	a, err := remote.Dial(ctx, remote.Config{URL: cmd.String("authority"), AllowInsecureLoopback: cmd.Bool("insecure-loopback"),
		Trust: remote.Trust{Pin: cmd.String("authority-fingerprint"), CAFile: cmd.String("authority-ca")},
		Actor: me, Key: key, AuthorityKeys: protocol.NewKeySet(apub), Logger: log,
		Patience: outagePatience(), Waiting: func(tries int, wait time.Duration, err error) {
			if reach.waiting(err) {
				log.Warn("the authority is unreachable; waiting", "grace", outagePatience().Grace, "err", err)
			} else {
				log.Debug("the authority is still unreachable", "tries", tries, "wait", wait, "err", err)
			}
		}, Reached: func(tries int) {
			if reach.reached() {
				log.Info("the authority answers again", "tries", tries)
			}
		}})
	if err != nil {
		return fail("", err)
	}
	// One session for every Mission: a second session of the agent would
	// replace the first (AUTH_STALE_SESSION), so one process coordinates
	// them all.
	if _, err := a.OpenSession(ctx); err != nil {
		return fail("", fmt.Errorf("open session: %w", err))
	}
	workers := splitWorkers(cmd.StringSlice("worker"))
	coords := make([]*plancoord.Coordinator, len(plans))
	for i, p := range plans {
		coords[i], err = plancoord.New(plancoord.Config{Authority: a, AgentID: me.ID, Key: key, Plan: p, Workers: workers,
			LeaseDuration: cmd.Duration("lease"), OfferTTL: cmd.Duration("offer-ttl"), MaxCandidates: int(cmd.Int("max-candidates")),
			Logger: log.With("component", "coordinator", "mission", p.Mission.ID), Inputs: inputs[p]})
		if err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	if err := startOps(ctx, cmd, cmd.Root().Writer, log, []prometheus.Collector{coordinatorMetrics{coords}},
		ops.Checks{Live: func() error { return nil }, Ready: func() error { return errors.Join(reach.ready(), coordinatorReady(coords)()) }}); err != nil {
		return fail("", err)
	}
	stdout := &syncWriter{W: cmd.Root().Writer}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		approved int
	)
	for i, c := range coords {
		p := plans[i]
		log.Info("coordinating", "mission", p.Mission.ID, "group", p.Mission.GroupID, "workers", workers)
		wg.Go(func() {
			prefix := "mission " + p.Mission.ID + ": "
			if err := c.Run(ctx); err != nil {
				if ctx.Err() != nil {
					err = errors.New("stopped before the Mission ended")
				}
				_ = fail(prefix, err)
				return
			}
			state := c.MissionState()
			fmt.Fprintf(stdout, "mission %s %s\n", p.Mission.ID, state)
			if state == protocol.MissionApproved {
				mu.Lock()
				approved++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if approved != len(coords) {
		return exitError{1}
	}
	return nil
}

func splitWorkers(values []string) []string {
	var out []string
	for _, v := range values {
		for _, w := range strings.Split(v, ",") {
			if w = strings.TrimSpace(w); w != "" {
				out = append(out, w)
			}
		}
	}
	return out
}
