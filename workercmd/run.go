package workercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/missionweave/mwp-worker/slots"
)

// demoCapability is what the built-in demo handler provides.
var demoCapability = protocol.Capability{ID: "demo.steps", Version: "1.0.0"}

// Options are what a Go program embedding handlers adds to run.
type Options struct {
	// Handlers run beside those of --handler-exec, each for its
	// Capability(); with none of either, the built-in demo handler.
	Handlers []slots.Handler
	// Ask, when set, replaces how `up` without --auto-approve asks a
	// terminal for the decision on its Mission; without it up shows the
	// review of package review and asks approve, request changes or quit.
	// Off a terminal up prints what awaits approval and how, and waits.
	Ask Asker
	// ownProcess (Main): the command's logger is also slog's default, so
	// a Go handler's slog lines come out in the chosen format.
	ownProcess bool
}

// Command is `mwp-worker run`: its flags, environment variables, signals
// and logging, with opts' handlers.
func Command(opts Options) *cli.Command {
	return &cli.Command{
		Name: "run",
		// A handler's command line may hold commas: lists are split here
		// (splitList), by newline for handlers and also by comma for Groups.
		DisableSliceFlagSeparator: true,
		Usage:                     "run the worker: accept offers, schedule, execute handlers in slots, renew leases, submit",
		Description: "Without --authority an embedded authority-lite is started in DIR/authority (wss on 127.0.0.1,\n" +
			"self-signed certificate) and the worker connects to it over real wss with the certificate pinned;\n" +
			"its URL and fingerprint are printed so coordinators can connect. With --authority the worker\n" +
			"connects there; pin the certificate with --authority-fingerprint and verify events with\n" +
			"--authority-key (the authority's authority.pub; without it events are not verified). Handler\n" +
			"outputs are uploaded to the authority's artifact route (PUT /mwp/artifacts/DIGEST) and published.\n\n" +
			"The agent id is the <id> of the key's id agent:<id>#<name> (mwp-worker keygen --key-id).\n" +
			"A remote authority must know the agent before its first HELLO: write the enrollment with\n" +
			"--enrollment FILE (valid for --enrollment-valid) and register it with the running authority\n" +
			"(`authority enroll FILE`) or at its start (`authority serve --enroll FILE`); later starts re-register the\n" +
			"card over the wire. The worker subscribes every Group the authority says it is a member of, at HELLO and\n" +
			"whenever that changes (docs/wire.md), so --group is only needed for Groups to follow before that.\n\n" +
			"Handlers: --handler-exec 'CAP=PATH [ARG...]' runs PATH with its arguments (JSON lines,\n" +
			"slots/EXTERNAL.md; the program's stderr goes to the log at DEBUG; PYTHONPATH holds the Python helper\n" +
			"mwpslot and PYTHONDONTWRITEBYTECODE is set) for capability CAP,\n" +
			"written ID or ID@VERSION (default version 1.0.0). With none, the built-in demo handler provides\n" +
			"demo.steps 1.0.0: three steps of --demo-step, each reported as structured progress and checkpointed (it yields\n" +
			"there when preempted and resumes from its checkpoint), then a text artifact naming the contract's\n" +
			"goal and one passing Evidence per acceptance criterion.\n\n" +
			"SIGINT or SIGTERM stops taking work, asks running slots for a safe point, sends their checkpoints\n" +
			"and exits 0 (a run still going after the drain timeout is stopped, and logged with its ids); a\n" +
			"second signal kills every handler process group at once and exits with status 130.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the worker's data directory (store, checkpoints, artifacts)", Required: true, Sources: cli.EnvVars("MWP_DATA")},
			&cli.StringFlag{Name: "key", Usage: "the agent's private key FILE (keygen --key-id agent:ID#k1)", Required: true, Sources: cli.EnvVars("MWP_KEY")},
			&cli.StringFlag{Name: "authority", Usage: "authority URL wss://HOST:PORT/mwp (default: an embedded authority)", Sources: cli.EnvVars("MWP_AUTHORITY")},
			&cli.StringFlag{Name: "authority-fingerprint", Usage: "pin the authority's certificate: sha256:<64 hex>", Sources: cli.EnvVars("MWP_AUTHORITY_FINGERPRINT")},
			&cli.StringFlag{Name: "authority-ca", Usage: "PEM file of certificates to trust instead of the system roots", Sources: cli.EnvVars("MWP_AUTHORITY_CA")},
			&cli.StringFlag{Name: "authority-key", Usage: "the authority's public key FILE (authority.pub) to verify events", Sources: cli.EnvVars("MWP_AUTHORITY_KEY")},
			&cli.StringSliceFlag{Name: "group", Usage: "Group to subscribe at start (optional: the authority tells the worker its Groups, also those it joins later; repeatable, or comma-separated; retried until the agent is a member)", Sources: cli.EnvVars("MWP_GROUPS")},
			&cli.IntFlag{Name: "slots", Usage: "execution slots, the Agent Card's maxConcurrency", Value: 2, Sources: cli.EnvVars("MWP_SLOTS")},
			handlerExecFlag(),
			handlerClarifyFlag(),
			&cli.StringFlag{Name: "enrollment", Usage: "write this agent's signed agent_card_register to FILE and exit"},
			&cli.DurationFlag{Name: "enrollment-valid", Usage: "how long the --enrollment document stays acceptable to the authority (at most 24h)", Value: protocol.DefaultEnrollmentValidity, Sources: cli.EnvVars("MWP_ENROLLMENT_VALID")},
			&cli.DurationFlag{Name: "demo-step", Usage: "how long each step of the built-in demo handler takes", Value: 100 * time.Millisecond, Sources: cli.EnvVars("MWP_DEMO_STEP")},
			&cli.BoolFlag{Name: "insecure-loopback", Usage: "allow ws:// to a loopback authority (tests only)"},
		}, append(tuningFlags(), OpsFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error { return runWorker(ctx, cmd, opts) },
	}
}

func runWorker(ctx context.Context, cmd *cli.Command, opts Options) error {
	// The embedded authority's background check logs from its own
	// goroutine while this one writes its lines: one lock for stderr.
	out, stderr := cmd.Root().Writer, &SyncWriter{W: cmd.Root().ErrWriter}
	fail := func(format string, args ...any) error {
		FailLine(cmd, stderr, "run: "+fmt.Sprintf(format, args...))
		return ExitError{1}
	}
	log, err := NewLogger(cmd, stderr)
	if err != nil {
		return fail("%v", err)
	}
	if opts.ownProcess {
		slog.SetDefault(log)
	}
	key, err := protocol.LoadPrivateKey(cmd.String("key"))
	if err != nil {
		return fail("--key: %v", err)
	}
	agentID, ok := agentOfKey(key.KeyID)
	if !ok {
		return fail("--key: key id %q is not an agent key (agent:<id>#<name>)", key.KeyID)
	}
	handlers, err := HandlersOf(cmd, opts.Handlers, agentID, cmd.Duration("demo-step"), log)
	if err != nil {
		return fail("%v", err)
	}
	if n := cmd.Int("slots"); n < 1 {
		return fail("--slots must be at least 1")
	}
	tuning, err := tuningFrom(cmd)
	if err != nil {
		return fail("%v", err)
	}
	cfg := runtime.WorkerConfig{
		Dir: cmd.String("data"), Key: key, AgentID: agentID, Handlers: handlers, Groups: splitList(cmd.StringSlice("group"), "\n,"),
		Card:   protocol.AgentCard{MaxConcurrency: uint64(cmd.Int("slots")), AgentVersion: "0.1.0"},
		Logger: log, AllowInsecureLoopback: cmd.Bool("insecure-loopback"),
	}
	tuning.apply(&cfg)
	if path := cmd.String("enrollment"); path != "" {
		if err := writeEnrollment(out, path, cfg, cmd.Duration("enrollment-valid")); err != nil {
			return fail("%v", err)
		}
		return nil
	}

	// The first signal drains; a second one exits at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// ctx is an argument: the function reassigns its own ctx below.
	go func(ctx context.Context) {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		log.Info("run: stopping at the next safe points (signal again to exit now)")
		cancel()
		<-sigs
		n := slots.KillAllHandlers()
		log.Warn("run: second signal: killed the running handler process groups; exiting now (the next start resumes from the last checkpoints)", "killed", n)
		os.Exit(130)
	}(ctx)

	var embedded *authoritylite.Service // the in-process authority, when there is one
	var linkWaits prometheus.Collector  // the artifact link's metric, with a remote authority
	if url := cmd.String("authority"); url != "" {
		cfg.URL = url
		cfg.Trust = client.Trust{Pin: cmd.String("authority-fingerprint"), CAFile: cmd.String("authority-ca")}
		if p := cmd.String("authority-key"); p != "" {
			k, err := protocol.LoadPublicKey(p)
			if err != nil {
				return fail("--authority-key: %v", err)
			}
			cfg.AuthorityKeys = protocol.NewKeySet(k)
		} else {
			log.Warn("no --authority-key: event signatures are not verified")
		}
		linkWaits = useRemoteArtifacts(ctx, &cfg)
		fmt.Fprintf(out, "agent %s connecting to %s\n", agentID, url)
	} else {
		emb, err := embed.Start(embed.Config{Dir: filepath.Join(cfg.Dir, "authority"), Logger: log})
		if err != nil {
			return fail("embedded authority: %v", err)
		}
		defer emb.Close()
		var stopOnFailure context.CancelFunc
		ctx, stopOnFailure = StopWhenFailed(ctx, emb.Service, log)
		defer stopOnFailure()
		embedded = emb.Service
		cfg.UseInProcess(emb)
		fmt.Fprintf(out, "embedded authority listening on %s\ncertificate fingerprint %s\n", emb.URL, emb.Fingerprint)
		fmt.Fprintf(out, "agent %s connecting to %s\n", agentID, emb.URL)
	}
	w, err := runtime.NewWorker(cfg)
	if err != nil {
		return fail("%v", err)
	}
	cols, checks := w.Collectors(), ops.Checks{Live: w.Live, Ready: w.Ready}
	if linkWaits != nil {
		cols = append(cols, linkWaits)
	}
	if embedded != nil {
		cols = append(cols, embedded.Collectors()...)
		checks = ops.Checks{Live: allOf(w.Live, embedded.Err), Ready: allOf(w.Ready, embedded.Err)}
	}
	if err := StartOps(ctx, cmd, out, log, cols, checks); err != nil {
		return fail("%v", err)
	}
	go func() {
		// Report the session once it is open.
		for ctx.Err() == nil {
			if st := w.Status(); st.SessionEpoch > 0 {
				fmt.Fprintf(out, "agent %s session %d open\n", agentID, st.SessionEpoch)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	err = w.Run(ctx)
	st := w.Status()
	fmt.Fprintf(out, "stopped: %d outcomes, %d commands buffered offline\n", len(st.Outcomes), st.Buffered)
	if embedded != nil {
		if ferr := FailedWrite(stderr, "run: embedded authority", embedded); ferr != nil {
			return ferr
		}
	}
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		fmt.Fprintln(out, "stopped by a signal before a session opened")
		return nil
	}
	if err != nil {
		if errors.Is(err, runtime.ErrNotRegistered) {
			return fail("%v (write it with --enrollment FILE and start the authority with --enroll FILE)", err)
		}
		return fail("%v", err)
	}
	return nil
}

// handlerExecFlag is --handler-exec, read by handlersFrom (run and up).
func handlerExecFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "handler-exec", Usage: "external handler `CAP=PATH [ARG...]`, CAP as ID or ID@VERSION; arguments split as a shell would, without one (repeatable; MWP_HANDLER_EXEC: one per line)", Sources: cli.EnvVars("MWP_HANDLER_EXEC")}
}

// handlerClarifyFlag is --handler-clarify, read by handlersFrom (run and up).
func handlerClarifyFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "handler-clarify", Usage: "ask the --handler-exec program of capability `ID` about each offered contract before accepting it (the clarify message of mwp-slot/1, slots/EXTERNAL.md; at most 10 s each); its questions are raised in the WorkItem's conversation and the offer is not accepted (repeatable)"}
}

// agentOfKey reads <id> from an agent key id agent:<id>#<name>.
func agentOfKey(keyID string) (string, bool) {
	rest, ok := strings.CutPrefix(keyID, "agent:")
	id, _, found := strings.Cut(rest, "#")
	if !ok || !found || !protocol.KeyBelongsTo(keyID, protocol.ActorAgent, id) {
		return "", false
	}
	return id, true
}

// handlersFrom builds the external handlers after the embedder's own, or,
// with neither, the demo handler.
func handlersFrom(specs, clarify []string, own []slots.Handler, demo demoHandler, log *slog.Logger) ([]slots.Handler, error) {
	if len(specs) == 0 && len(own) == 0 {
		if len(clarify) > 0 {
			return nil, fmt.Errorf("--handler-clarify %s: no --handler-exec provides it", clarify[0])
		}
		return []slots.Handler{demo}, nil
	}
	hs := append([]slots.Handler(nil), own...)
	asked, provided := map[string]bool{}, map[string]bool{}
	var env map[string]string
	if len(specs) > 0 {
		var err error
		if env, err = handlerEnv(); err != nil {
			return nil, err
		}
	}
	for _, id := range clarify {
		asked[id] = true
	}
	for _, s := range specs {
		capSpec, command, ok := strings.Cut(s, "=")
		if !ok || capSpec == "" || command == "" {
			return nil, fmt.Errorf("--handler-exec: %q: want CAP=PATH [ARG...]", s)
		}
		argv, err := splitCommand(command)
		if err != nil {
			return nil, fmt.Errorf("--handler-exec: %q: %v", s, err)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("--handler-exec: %q: want CAP=PATH [ARG...]", s)
		}
		path := argv[0]
		id, version, hasVersion := strings.Cut(capSpec, "@")
		if !hasVersion {
			version = "1.0.0"
		}
		if !slots.VersionSatisfies(version, version) {
			return nil, fmt.Errorf("--handler-exec: %q: version %q is not MAJOR.MINOR.PATCH", s, version)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("--handler-exec: %v", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("--handler-exec: %v", err)
		}
		x := slots.Exec{Path: abs, Args: argv[1:], Cap: protocol.Capability{ID: id, Version: version}, Env: env, Logger: log}
		provided[id] = true
		if asked[id] {
			hs = append(hs, slots.ClarifyingExec{Exec: x})
			continue
		}
		hs = append(hs, x)
	}
	for _, id := range clarify {
		if !provided[id] {
			return nil, fmt.Errorf("--handler-clarify %s: no --handler-exec provides it", id)
		}
	}
	return hs, nil
}

// writeEnrollment writes the agent's signed agent_card_register, valid
// for valid (the enrollment extension, docs/wire.md).
func writeEnrollment(out io.Writer, path string, cfg runtime.WorkerConfig, valid time.Duration) error {
	now := time.Now()
	card := cfg.Card
	card.AgentID = cfg.AgentID
	card.OrganizationID, card.DisplayName = "org-1", cfg.AgentID
	card.Roles = protocol.List[protocol.Role]{protocol.RoleWorker}
	for _, h := range cfg.Handlers {
		card.Capabilities = append(card.Capabilities, h.Capability())
	}
	raw, err := protocol.Enrollment(card, cfg.Key, now, valid)
	if protocol.CodeOf(err) == protocol.CodeInvalidCommand {
		return fmt.Errorf("--enrollment-valid %s: %v", valid, err)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "enrollment of %s written to %s, valid until %s\n", cfg.AgentID, path, protocol.NewTime(now.Add(valid)))
	return err
}

// demoHandler is the built-in handler (see the run command's description).
type demoHandler struct {
	agentID string
	step    time.Duration
}

func (demoHandler) Capability() protocol.Capability { return demoCapability }

func (h demoHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	const steps = 3
	n := 0
	if st, ok := w.Resume(); ok {
		n, _ = strconv.Atoi(string(st))
	} else if _, err := w.Checkpoint(ctx, []byte("0"), checkpoint.Meta{Phase: "started"}); err != nil {
		// A first safe point, so a preemption before step 1 can yield.
		return slots.Result{}, err
	}
	c := w.Contract()
	for n < steps {
		select {
		case <-w.PreemptRequested():
			return slots.Result{}, slots.ErrPreempted
		case <-ctx.Done():
			return slots.Result{}, ctx.Err()
		case <-time.After(h.step):
		}
		n++
		phase := fmt.Sprintf("step %d of %d", n, steps)
		err := w.Progress(ctx, protocol.Progress{Phase: phase, MilestonesCompleted: protocol.List[string]{phase},
			NextCheckpoint: fmt.Sprintf("step %d", n+1), Blockers: protocol.List[string]{}, EvidenceRefs: protocol.List[string]{},
			RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(time.Now().Add(time.Duration(steps-n) * h.step)), Confidence: 0.9}})
		if err != nil {
			return slots.Result{}, err
		}
		if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: phase}); err != nil {
			return slots.Result{}, err
		}
	}
	d, err := w.PublishArtifact(ctx, "text/plain", []byte("demo result for "+w.Slot().WorkItemID+": "+c.Goal+"\n"))
	if err != nil {
		return slots.Result{}, err
	}
	var ev []protocol.Evidence
	for _, a := range c.AcceptanceCriteria {
		ev = append(ev, protocol.Evidence{Subject: w.Slot().WorkItemID, Criteria: protocol.List[string]{a.ID}, Method: "demo-handler",
			Result: protocol.EvidencePass, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: h.agentID}, Timestamp: protocol.NewTime(time.Now()),
			Artifacts: protocol.List[string]{d}})
	}
	return slots.Result{Artifacts: []string{d}, Evidence: ev}, nil
}

// allOf is a check that passes when every one of checks does.
func allOf(checks ...func() error) func() error {
	return func() error {
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
}

// splitCommand splits a handler's command line into words, as a shell
// would without running one: blanks separate words; 'single quotes' keep
// everything; "double quotes" keep everything but \" and \\; a backslash
// outside quotes keeps the next character.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' at byte %d", i)
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a trailing backslash escapes nothing")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// splitList splits every value at any of seps and drops empty parts.
func splitList(values []string, seps string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
