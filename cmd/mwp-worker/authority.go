package main

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/missionweave/mwp-worker/authority-lite/httpapi"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/workercmd"
)

func authorityCommand() *cli.Command {
	return &cli.Command{
		Name:  "authority",
		Usage: "run authority-lite, the minimal Group Authority",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve the WebSocket binding at wss://HOST:PORT/mwp",
			Description: "Opens the authority's log DIR/authority.db, its event-signing key DIR/authority.key and a\n" +
				"self-signed TLS 1.3 certificate DIR/cert.pem, then serves until SIGINT or SIGTERM. A first start (no key,\n" +
				"no log) creates all three. A key whose log is missing or empty is refused (LOG_MISSING), and so is a\n" +
				"log created for another key (LOG_KEY_MISMATCH): --init starts a new, empty log beside the existing key,\n" +
				"once (it is refused when a log exists). It prints the URL, the certificate fingerprint (give it to\n" +
				"workers with --authority-fingerprint), the key id of its event-signing key (the public key to verify\n" +
				"events with is the file DIR/authority.pub) and the log's id. Humans and Organization policy services are registered with\n" +
				"--human ID=PUBKEYFILE and --policy ID=PUBKEYFILE (key files from `mwp-worker keygen`); agents\n" +
				"register their own Agent Cards over the wire once known: a HELLO needs a registered key, so an\n" +
				"agent's first card comes with --enroll FILE (written by `mwp-worker run --enrollment FILE`), or with\n" +
				"`mwp-worker authority enroll FILE` while it runs.",
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
				&cli.StringFlag{Name: "listen", Usage: "address to listen on", Value: "127.0.0.1:7443", Sources: cli.EnvVars("MWP_AUTHORITY_LISTEN")},
				&cli.BoolFlag{Name: "init", Usage: "start a new, empty log beside an existing authority.key (receipts, replay guards and sequences start over)"},
				&cli.BoolFlag{Name: "insecure-loopback", Usage: "serve plain ws:// (tests only; refused on non-loopback addresses)"},
				&cli.StringSliceFlag{Name: "human", Usage: "register a human principal: ID=PUBKEYFILE (repeatable)"},
				&cli.StringSliceFlag{Name: "policy", Usage: "register an Organization policy service: ID=PUBKEYFILE (repeatable)"},
				&cli.StringSliceFlag{Name: "profile", Usage: "register an extension profile the Organization approved: `PROFILE=SCHEMA` files (from authority sign-profile; repeatable)"},
				&cli.BoolFlag{Name: "closed-registration", Usage: "refuse self-signed Agent Cards of unknown agents"},
				&cli.IntFlag{Name: "retain-events", Usage: "events kept online per Group: past twice this many the Group is snapshotted and its older events deleted (readers behind restore the snapshot); 0 keeps every event (docs/operations.md, Retention)", Value: 10000, Sources: cli.EnvVars("MWP_RETAIN_EVENTS")},
				&cli.DurationFlag{Name: "archive-after", Usage: "archive a Group whose Mission and WorkItems are all terminal once its last event is this old: it takes no more commands, and its state leaves memory; 0 never archives", Value: time.Hour, Sources: cli.EnvVars("MWP_ARCHIVE_AFTER")},
				&cli.DurationFlag{Name: "purge-after", Usage: "delete an archived Group this long after its archive: its events, records and snapshot go, its id stays taken, and it answers GROUP_NOT_FOUND (its receipts go 6m after the archive either way); 0 keeps archived Groups for good; needs --archive-after (docs/operations.md, Retention)", Sources: cli.EnvVars("MWP_PURGE_AFTER")},
				&cli.StringSliceFlag{Name: "enroll", Usage: "submit an agent's signed agent_card_register `FILE` at start (from run --enrollment; repeatable)"},
				&cli.IntFlag{Name: "max-conns", Usage: "connections held at once, handshaking or not; more get HTTP 503 (docs/operations.md)", Value: 1024, Sources: cli.EnvVars("MWP_MAX_CONNS")},
				&cli.IntFlag{Name: "max-conns-per-ip", Usage: "connections per remote IP address not yet authenticated (handshaking, or carrying an HTTPS route request); more get HTTP 503. One whose HELLO succeeded counts only toward --max-conns", Value: 64, Sources: cli.EnvVars("MWP_MAX_CONNS_PER_IP")},
				&cli.StringFlag{Name: "hello-rate", Usage: "failed HELLO attempts per remote IP address: `BURST/EVERY`, BURST at once, then one more per EVERY; a HELLO that succeeds is not counted; over it, ERROR RATE_LIMITED (docs/operations.md)", Value: "10/1s", Sources: cli.EnvVars("MWP_HELLO_RATE")},
				&cli.DurationFlag{Name: "handshake-timeout", Usage: "time from TCP accept to a completed HELLO", Value: 10 * time.Second, Sources: cli.EnvVars("MWP_HANDSHAKE_TIMEOUT")},
				&cli.StringSliceFlag{Name: "policy-limit", Usage: "a spec 20 limit per Group, `NAME=N`: maxOpenWorkItems, maxActiveWorkItems, maxQueuedWorkItems, maxOpenClarifications, maxDuplicateWorkItems or maxDelegationDepth (repeatable or comma-separated; docs/operations.md has the defaults)", Sources: cli.EnvVars("MWP_POLICY_LIMITS")},
				&cli.StringFlag{Name: "route-rate", Usage: "requests to the HTTPS routes per remote IP address: `BURST/EVERY`, BURST at once, then one more per EVERY; more are answered 429 RATE_LIMITED (docs/operations.md)", Value: "60/100ms", Sources: cli.EnvVars("MWP_ROUTE_RATE")},
				&cli.FloatFlag{Name: "policy-soft-limit", Usage: "the fraction of a counted limit at which the authority posts a policy.softLimit notice to the Group; 0 posts none", Value: 0.8, Sources: cli.EnvVars("MWP_POLICY_SOFT_LIMIT")},
			}, append(storeFlags(), opsFlags()...)...),
			Action: serveAuthority,
		}, authorityInspectCommand(), authorityCheckCommand(), authorityCompactCommand(), authorityEnrollCommand(), authoritySignProfileCommand()},
	}
}

func serveAuthority(ctx context.Context, cmd *cli.Command) error {
	// The log (the authority's background work included) and the
	// refusals below share stderr.
	stderr := &syncWriter{W: cmd.Root().ErrWriter}
	fail := func(format string, args ...any) error {
		workercmd.FailLine(cmd, stderr, "authority serve: "+fmt.Sprintf(format, args...))
		return exitError{1}
	}
	limits := wss.Options{MaxConns: int(cmd.Int("max-conns")), MaxConnsPerIP: int(cmd.Int("max-conns-per-ip")), HandshakeTimeout: cmd.Duration("handshake-timeout")}
	if limits.MaxConns < 1 || limits.MaxConnsPerIP < 1 || limits.HandshakeTimeout <= 0 {
		return fail("--max-conns, --max-conns-per-ip and --handshake-timeout must be positive")
	}
	burst, every, err := parseRate(cmd.String("route-rate"))
	if err != nil {
		return fail("--route-rate: %v", err)
	}
	limits.RouteBurst, limits.RouteEvery = burst, every
	if limits.HelloBurst, limits.HelloEvery, err = parseRate(cmd.String("hello-rate")); err != nil {
		return fail("--hello-rate: %v", err)
	}
	policy, err := policyFrom(cmd)
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := cmd.String("data")
	log, err := newLogger(cmd, stderr)
	if err != nil {
		return fail("%v", err)
	}
	if cmd.Int("retain-events") < 0 || cmd.Duration("archive-after") < 0 || cmd.Duration("purge-after") < 0 {
		return fail("--retain-events, --archive-after and --purge-after must not be negative")
	}
	if cmd.Duration("purge-after") > 0 && cmd.Duration("archive-after") == 0 {
		return fail("--purge-after deletes archived Groups: it needs --archive-after")
	}
	store, storeName, err := openStore(ctx, cmd)
	if err != nil {
		return fail("%v", err)
	}
	svc, err := authoritylite.Open(authoritylite.Config{Dir: dir, Logger: log, ClosedRegistration: cmd.Bool("closed-registration"), Init: cmd.Bool("init"), Policy: policy,
		RetainEvents: uint64(cmd.Int("retain-events")), ArchiveAfter: cmd.Duration("archive-after"), PurgeAfter: cmd.Duration("purge-after"),
		Store: store, StoreName: storeName})
	if err != nil {
		if store != nil {
			store.Close()
		}
		return fail("%v", err)
	}
	defer svc.Close()
	for _, p := range []struct {
		flag string
		kind protocol.ActorKind
	}{{"human", protocol.ActorHuman}, {"policy", protocol.ActorService}} {
		for _, spec := range cmd.StringSlice(p.flag) {
			id, path, ok := strings.Cut(spec, "=")
			if !ok || id == "" || path == "" {
				return fail("--%s %q: want ID=PUBKEYFILE", p.flag, spec)
			}
			k, err := protocol.LoadPublicKey(path)
			if err != nil {
				return fail("--%s %s: %v", p.flag, id, err)
			}
			if err := svc.AddPrincipal(p.kind, id, k); err != nil {
				return fail("--%s %s: %v", p.flag, id, err)
			}
		}
	}
	if err := registerProfiles(svc, cmd.StringSlice("profile")); err != nil {
		return fail("%v", err)
	}
	// The binding cannot authenticate an agent the authority does not
	// know yet, so its first card arrives out of band.
	for _, path := range cmd.StringSlice("enroll") {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fail("--enroll: %v", err)
		}
		if _, err := svc.Submit(ctx, "", bytes.TrimSpace(raw)); err != nil {
			return fail("--enroll %s: %v", path, err)
		}
	}
	opts := wss.ListenOptions{InsecureLoopback: cmd.Bool("insecure-loopback")}
	scheme, fingerprint := "ws", ""
	if !opts.InsecureLoopback {
		cert, fp, err := wss.LoadOrCreateCert(dir)
		if err != nil {
			return fail("%v", err)
		}
		opts.Certificate, scheme, fingerprint = &cert, "wss", fp
	}
	ln, err := wss.Listen(ctx, cmd.String("listen"), opts)
	if err != nil {
		return fail("%v", err)
	}
	out := cmd.Root().Writer
	fmt.Fprintf(out, "authority %s listening on %s://%s/mwp\n", svc.ID(), scheme, ln.Addr())
	if fingerprint != "" {
		fmt.Fprintf(out, "certificate fingerprint %s\n", fingerprint)
	}
	fmt.Fprintf(out, "event key %s\n", svc.PublicKey().KeyID)
	id := svc.Identity()
	fmt.Fprintf(out, "log %s created %s\n", id.LogID, id.CreatedAt.Format(time.RFC3339))
	limits.Logger = log
	backpressure := backpressureCounter()
	limits.OnBackpressure = func(g string) { backpressure.WithLabelValues(g).Inc() }
	limits.Routes = httpapi.New(svc)
	server := wss.NewServer(svc, limits)
	ctx, stopOnFailure := stopWhenFailed(ctx, svc, log)
	defer stopOnFailure()
	if err := startOps(ctx, cmd, out, log, append(append(svc.Collectors(), backpressure), connectionGauges(server)...), ops.Checks{Live: svc.Err, Ready: svc.Err}); err != nil {
		return fail("%v", err)
	}
	if err := ops.ServeSocket(ctx, filepath.Join(dir, authoritySocket), func() any { return svc.Status() }, enrollOps(svc), log); err != nil {
		return fail("%v", err)
	}
	if err := server.Serve(ctx, ln); err != nil {
		return fail("%v", err)
	}
	return failedWrite(stderr, "authority serve", svc)
}

// backpressureCounter counts a Group's stream pausing on a connection's
// full send queue.
func backpressureCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mwp_authority_backpressure_total",
		Help: "Times a Group's event stream to a connection paused on a full send queue (a BACKPRESSURE to a slow subscriber), by Group.",
	}, []string{"group"})
}

const connectionsHelp = "Connections the binding holds, by state: admitted (handshaking or in session; at most --max-conns), in_session (of those, HELLO completed) or refusing (accepted only to be answered 503 over a cap)."

// connectionGauges are the binding's connection counts, read when scraped.
func connectionGauges(server *wss.Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mwp_authority_connections",
			Help:        connectionsHelp,
			ConstLabels: prometheus.Labels{"state": "admitted"},
		}, func() float64 { a, _, _ := server.Connections(); return float64(a) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mwp_authority_connections",
			Help:        connectionsHelp,
			ConstLabels: prometheus.Labels{"state": "in_session"},
		}, func() float64 { _, _, n := server.Connections(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mwp_authority_connections",
			Help:        connectionsHelp,
			ConstLabels: prometheus.Labels{"state": "refusing"},
		}, func() float64 { _, r, _ := server.Connections(); return float64(r) }),
	}
}

// policyFrom reads --policy-limit and --policy-soft-limit.
// parseRate reads a token bucket, BURST/EVERY: BURST at once, then one
// more per EVERY.
func parseRate(s string) (int, time.Duration, error) {
	b, e, ok := strings.Cut(s, "/")
	burst, err := strconv.Atoi(b)
	if !ok || err != nil || burst < 1 {
		return 0, 0, fmt.Errorf("%q: want BURST/EVERY, e.g. 60/1s, with BURST a whole number of at least 1", s)
	}
	every, err := time.ParseDuration(e)
	if err != nil || every <= 0 {
		return 0, 0, fmt.Errorf("%q: EVERY must be a positive duration, e.g. 1s or 100ms", s)
	}
	return burst, every, nil
}

func policyFrom(cmd *cli.Command) (authoritylite.Policy, error) {
	var p authoritylite.Policy
	for _, spec := range cmd.StringSlice("policy-limit") {
		for _, one := range strings.Split(spec, ",") {
			name, v, ok := strings.Cut(strings.TrimSpace(one), "=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil {
				return p, fmt.Errorf("--policy-limit %q: want NAME=N", one)
			}
			if err := p.Set(name, n); err != nil {
				return p, fmt.Errorf("--policy-limit: %v", err)
			}
		}
	}
	switch f := cmd.Float("policy-soft-limit"); {
	case f == 0:
		p.SoftLimit = -1
	case f < 0 || f >= 1:
		return p, fmt.Errorf("--policy-soft-limit %v: want a fraction from 0 up to (not including) 1", f)
	default:
		p.SoftLimit = f
	}
	return p, nil
}
