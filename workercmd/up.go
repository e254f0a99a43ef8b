package workercmd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	plancoord "github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

// The agents `up` runs besides the plan's owner.
const (
	upCoordinator = "coordinator"
	upWorker      = "worker-1"
)

// Asker asks a human on a terminal (in, out) to decide on the Mission
// awaiting approval in a; decided false when no decision was taken (the
// human quit or the input ended), and up then waits for one from elsewhere.
type Asker func(ctx context.Context, in io.Reader, out io.Writer, a Approval) (decided bool, err error)

// Approval is the Mission `up` runs, once it awaits approval, and the
// human who decides: its owner, with the owner's key.
type Approval struct {
	Service   *authoritylite.Service
	Owner     protocol.Actor
	Key       protocol.PrivateKey
	MissionID string
	GroupID   string
}

// UpCommand is `mwp-worker up`: one plan end to end in one process with
// opts' handlers beside those of --handler-exec; on a terminal it asks for
// the approval with package review's review (opts.Ask, when set, instead).
func UpCommand(opts Options) *cli.Command {
	return &cli.Command{
		Name:                      "up",
		DisableSliceFlagSeparator: true,
		Usage:                     "run one plan end to end in this process: an embedded authority, its coordinator and a worker",
		ArgsUsage:                 "PLAN",
		Description: "Starts an embedded authority (wss on 127.0.0.1, as `run` without --authority), generates into DATA\n" +
			"the keys of the plan's first approver (the Mission's human owner), of agent " + upCoordinator + " and of agent\n" +
			upWorker + ", runs the worker with the handlers of --handler-exec (as `run` takes them; none: the demo handler)\n" +
			"and the coordinator of the plan, creates the Mission as its owner and assigns the coordinator.\n" +
			"Without --data, DATA is a new temporary directory, removed when up exits.\n" +
			"Each stage's state changes are printed one line each. When the Mission is submitted for approval,\n" +
			"--auto-approve approves it as the owner; otherwise a terminal is shown the evidence and asked, and\n" +
			"without one a line says what awaits approval and up waits. Exit 0 once approved; 1 when the Mission\n" +
			"is terminated or cancelled (the reason on one line of stderr). Run again with the same --data to resume.",
		Flags: append([]cli.Flag{
			handlerExecFlag(),
			handlerClarifyFlag(),
			InputFlag(),
			&cli.BoolFlag{Name: "auto-approve", Usage: "approve the Mission as its owner once it is submitted", Sources: cli.EnvVars("MWP_AUTO_APPROVE")},
			&cli.StringFlag{Name: "data", Usage: "the data directory (authority, worker store, keys), kept; default a new temporary directory, printed and removed at exit", Sources: cli.EnvVars("MWP_DATA")},
			&cli.IntFlag{Name: "slots", Usage: "the worker's execution slots", Value: 2, Sources: cli.EnvVars("MWP_SLOTS")},
			costFlag(),
			limitFlag(),
		}, OpsFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error { return upMission(ctx, cmd, opts) },
	}
}

func upMission(ctx context.Context, cmd *cli.Command, opts Options) error {
	out, stderr := &SyncWriter{W: cmd.Root().Writer}, &SyncWriter{W: cmd.Root().ErrWriter}
	fail := func(format string, args ...any) error {
		FailLine(cmd, stderr, "up: "+OneLine(fmt.Sprintf(format, args...)))
		return ExitError{1}
	}
	if cmd.Args().Len() != 1 {
		return fail("exactly one PLAN file is required")
	}
	raw, err := os.ReadFile(cmd.Args().First())
	if err != nil {
		return fail("%v", err)
	}
	p, err := plan.Parse(cmd.Args().First(), raw)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitError{1}
	}
	inputs, err := PlanInputs(p, cmd.StringSlice("input"))
	if err != nil {
		return fail("%v", err)
	}
	costs, limits, err := budgetsFrom(cmd)
	if err != nil {
		return fail("%v", err)
	}
	log, err := NewLogger(cmd, stderr)
	if err != nil {
		return fail("%v", err)
	}
	if opts.ownProcess {
		slog.SetDefault(log)
	}
	handlers, err := HandlersOf(cmd, opts.Handlers, upWorker, 100*time.Millisecond, log)
	if err != nil {
		return fail("%v", err)
	}
	if err := handlersCover(p, handlers); err != nil {
		return fail("%v", err)
	}
	dir := cmd.String("data")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mwp-up-"); err != nil {
			return fail("%v", err)
		}
		// Deferred first, so it runs after the authority and the
		// worker closed their stores in it.
		defer os.RemoveAll(dir)
		fmt.Fprintf(out, "data directory %s (temporary: removed when up exits; --data DIR keeps one)\n", dir)
	} else {
		fmt.Fprintf(out, "data directory %s\n", dir)
	}
	owner := protocol.Actor{Kind: protocol.ActorHuman, ID: p.Approval.Approvers[0]}
	keys := map[string]protocol.PrivateKey{}
	for _, a := range []protocol.Actor{owner, {Kind: protocol.ActorAgent, ID: upCoordinator}, {Kind: protocol.ActorAgent, ID: upWorker}} {
		if keys[a.ID], err = upKey(filepath.Join(dir, "keys"), a); err != nil {
			return fail("key of %s: %v", a.ID, err)
		}
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	emb, err := embed.Start(embed.Config{Dir: filepath.Join(dir, "authority"), Logger: log})
	if err != nil {
		return fail("embedded authority: %v", err)
	}
	defer emb.Close()
	ctx, stopOnFailure := StopWhenFailed(ctx, emb.Service, log)
	defer stopOnFailure()
	svc := emb.Service
	fmt.Fprintf(out, "embedded authority listening on %s\ncertificate fingerprint %s\n", emb.URL, emb.Fingerprint)
	if err := svc.AddPrincipal(owner.Kind, owner.ID, keys[owner.ID].Public()); err != nil {
		return fail("%v", err)
	}
	coordKey := keys[upCoordinator]
	if err := svc.Principal(protocol.Actor{Kind: protocol.ActorAgent, ID: upCoordinator}, coordKey).Join(ctx, plancoord.Card(upCoordinator)); err != nil {
		return fail("coordinator: %v", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No Groups: the Mission's does not exist yet (a SUBSCRIBE would be
	// refused GROUP_NOT_FOUND and logged); the authority tells the worker
	// once the coordinator makes it a member.
	wcfg := runtime.WorkerConfig{Dir: filepath.Join(dir, "worker"), Key: keys[upWorker], AgentID: upWorker, Handlers: handlers,
		Card: protocol.AgentCard{MaxConcurrency: uint64(max(cmd.Int("slots"), 1)), AgentVersion: "0.1.0"}, Logger: log,
		Costs: costs, Limits: limits}
	wcfg.UseInProcess(emb)
	wcfg.OnRetry = func(r slots.Retry) { fmt.Fprintln(out, retryLine(p, r)) }
	w, err := runtime.NewWorker(wcfg)
	if err != nil {
		return fail("worker: %v", err)
	}
	if err := StartOps(ctx, cmd, out, log, append(w.Collectors(), svc.Collectors()...),
		ops.Checks{Live: allOf(w.Live, svc.Err), Ready: allOf(w.Ready, svc.Err)}); err != nil {
		return fail("%v", err)
	}
	werr := make(chan error, 1)
	go func() { werr <- w.Run(ctx) }()
	defer func() { cancel(); <-werr }()
	if err := waitCard(ctx, svc, upWorker, werr); err != nil {
		return fail("worker: %v", err)
	}

	human := svc.Principal(owner, keys[owner.ID])
	if err := upStart(ctx, human, p, svc); err != nil {
		return fail("%v", err)
	}
	c, err := plancoord.New(plancoord.Config{Authority: embed.NewActor(svc, protocol.Actor{Kind: protocol.ActorAgent, ID: upCoordinator}),
		AgentID: upCoordinator, Key: coordKey, Plan: p, Workers: []string{upWorker}, Logger: log.With("component", "coordinator"), Inputs: inputs})
	if err != nil {
		return fail("%v", err)
	}
	cerr := make(chan error, 1)
	go func() { cerr <- c.Run(ctx) }()

	in := cmd.Root().Reader
	if in == nil {
		in = os.Stdin
	}
	ask := opts.Ask
	if ask == nil {
		ask = askTerminal
	}
	r := upRun{out: out, svc: svc, plan: p, approval: Approval{Service: svc, Owner: owner, Key: keys[owner.ID], MissionID: p.Mission.ID, GroupID: p.Mission.GroupID},
		auto: cmd.Bool("auto-approve"), ask: ask, in: in, log: log, dir: dir, url: emb.URL}
	end, reason, err := r.follow(ctx, cerr)
	if ferr := FailedWrite(stderr, "up: embedded authority", svc); ferr != nil {
		return ferr
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return fail("stopped before the Mission ended")
	case err != nil:
		return fail("%v", err)
	case end != protocol.MissionApproved:
		return fail("mission %s %s: %s", p.Mission.ID, end, reason)
	}
	return nil
}

// handlersCover refuses a plan with a stage no handler can run: its
// Mission would wait for a worker that never comes.
func handlersCover(p *plan.Plan, hs []slots.Handler) error {
	var have []string
	for _, h := range hs {
		have = append(have, h.Capability().ID+"@"+h.Capability().Version)
	}
	for _, st := range p.Stages {
		if !slices.ContainsFunc(hs, func(h slots.Handler) bool {
			c := h.Capability()
			return c.ID == st.Capability.ID && protocol.VersionSatisfies(c.Version, st.Capability.Version)
		}) {
			return fmt.Errorf("stage %s needs capability %s %s, and the handlers provide %s (--handler-exec CAP=PATH)",
				st.ID, st.Capability.ID, st.Capability.Version, strings.Join(have, ", "))
		}
	}
	return nil
}

// upKey loads the key of a in dir, generating it on the first run.
func upKey(dir string, a protocol.Actor) (protocol.PrivateKey, error) {
	path := filepath.Join(dir, a.ID+protocol.PrivateKeyExt)
	if k, err := protocol.LoadPrivateKey(path); err == nil {
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return protocol.PrivateKey{}, err
	}
	k, err := protocol.GenerateKey(protocol.KeyIDFor(a.Kind, a.ID, "k1"), rand.Reader)
	if err != nil {
		return protocol.PrivateKey{}, err
	}
	_, _, err = protocol.WriteKeyFiles(dir, a.ID, k)
	return k, err
}

// waitCard waits until the worker has registered its Agent Card, which the
// coordinator reads to know what it can offer it.
func waitCard(ctx context.Context, svc *authoritylite.Service, agentID string, werr <-chan error) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, ok := svc.AgentCard(agentID); ok {
			return nil
		}
		select {
		case err := <-werr:
			return fmt.Errorf("stopped before registering: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// upStart creates the plan's Mission as its owner and assigns the
// coordinator, unless an earlier run with the same data did.
func upStart(ctx context.Context, human *authoritylite.Principal, p *plan.Plan, svc *authoritylite.Service) error {
	g := p.Mission.GroupID
	m, ok := svc.Mission(g)
	if !ok {
		create := p.CreateMission(svc.Now())
		if _, err := human.Do(ctx, protocol.CmdMissionCreate, g, &create); err != nil {
			return fmt.Errorf("mission.create: %w", err)
		}
	} else if m.Coordinator != nil && m.Coordinator.AgentID == upCoordinator {
		return nil
	}
	_, err := human.Do(ctx, protocol.CmdMissionAssignCoordinator, g, &protocol.AssignCoordinatorPayload{
		MissionID: p.Mission.ID, AgentID: upCoordinator, LeaseDurationMs: uint64((10 * time.Minute).Milliseconds())})
	if err != nil {
		return fmt.Errorf("mission.assign_coordinator: %w", err)
	}
	return nil
}

// upRun follows the Mission's log for `up`: progress lines and approval.
type upRun struct {
	out      io.Writer
	svc      *authoritylite.Service
	plan     *plan.Plan
	approval Approval
	auto     bool
	ask      Asker
	in       io.Reader
	log      *slog.Logger
	dir, url string
}

// follow prints the progress until the Mission ends; it returns its end
// state and, for a terminated or cancelled one, the reason.
func (r *upRun) follow(ctx context.Context, cerr <-chan error) (protocol.MissionState, string, error) {
	g := r.plan.Mission.GroupID
	var after uint64
	var p progress
	for {
		changed := r.svc.Changed(g, after)
		evs, err := r.svc.Events(g, after, 0)
		if err != nil {
			return "", "", err
		}
		for _, se := range evs {
			after = se.Sequence
			lines, end, reason, err := p.apply(r.plan, se.Raw)
			if err != nil {
				return "", "", err
			}
			for _, l := range lines {
				fmt.Fprintln(r.out, l)
			}
			switch end {
			case protocol.MissionApproved, protocol.MissionCancelled, protocol.MissionTerminated:
				return end, reason, nil
			case protocol.MissionAwaitingApproval:
				if err := r.approve(ctx); err != nil {
					return "", "", err
				}
			}
		}
		select {
		case <-changed:
		case err := <-cerr:
			if err != nil {
				return "", "", fmt.Errorf("coordinator: %w", err)
			}
			cerr = nil // it ended with the Mission; the log says how
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
}

// approve answers a submission for approval: as the owner with
// --auto-approve, by asking a terminal, else by saying what waits.
func (r *upRun) approve(ctx context.Context) error {
	switch {
	case r.auto:
		return autoApprove(ctx, r.approval, "approved by up --auto-approve")
	case inIsTerminal(r.in):
		decided, err := r.ask(ctx, r.in, r.out, r.approval)
		if err == nil && !decided {
			r.waiting()
		}
		return err
	}
	r.waiting()
	return nil
}

// autoApprove approves a's Mission as its owner, at the revision it
// awaits approval at.
func autoApprove(ctx context.Context, a Approval, comment string) error {
	m, ok := a.Service.Mission(a.GroupID)
	if !ok || m.State != protocol.MissionAwaitingApproval {
		return fmt.Errorf("mission %s is not awaiting approval", a.MissionID)
	}
	_, err := a.Service.Principal(a.Owner, a.Key).Do(ctx, protocol.CmdMissionApprove, a.GroupID,
		&protocol.ApproveMissionPayload{MissionID: a.MissionID, ApprovalID: fmt.Sprintf("apr-%s-%d", a.MissionID, m.Revision), Comment: comment},
		func(e *protocol.Envelope) { e.ExpectedRevision = protocol.Uint64(m.Revision) })
	if err != nil {
		return fmt.Errorf("mission.approve: %w", err)
	}
	return nil
}

func (r *upRun) waiting() {
	fmt.Fprintf(r.out, "awaiting approval: mission %s by %s (owner key %s, authority %s)\n", r.plan.Mission.ID,
		r.approval.Owner.ID, filepath.Join(r.dir, "keys", r.approval.Owner.ID+protocol.PrivateKeyExt), r.url)
}
