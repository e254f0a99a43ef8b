package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

func authorityCommand() *cli.Command {
	return &cli.Command{
		Name:  "authority",
		Usage: "run authority-lite, the minimal Group Authority",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve the WebSocket binding at wss://HOST:PORT/mwp",
			Description: "Opens (creating on first start) the authority's log DIR/authority.db, its event-signing key\n" +
				"DIR/authority.key and a self-signed TLS 1.3 certificate DIR/cert.pem, then serves until SIGINT or\n" +
				"SIGTERM. It prints the URL, the certificate fingerprint (give it to workers with --authority-fingerprint)\n" +
				"and the authority's public key. Humans and Organization policy services are registered with\n" +
				"--human ID=PUBKEYFILE and --policy ID=PUBKEYFILE (key files from `mwp-worker keygen`); agents\n" +
				"register their own Agent Cards over the wire once known: a HELLO needs a registered key, so an\n" +
				"agent's first card comes with --enroll FILE (written by `mwp-worker run --enrollment FILE`).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
				&cli.StringFlag{Name: "listen", Usage: "address to listen on", Value: "127.0.0.1:7443", Sources: cli.EnvVars("MWP_AUTHORITY_LISTEN")},
				&cli.BoolFlag{Name: "insecure-loopback", Usage: "serve plain ws:// (tests only; refused on non-loopback addresses)"},
				&cli.StringSliceFlag{Name: "human", Usage: "register a human principal: ID=PUBKEYFILE (repeatable)"},
				&cli.StringSliceFlag{Name: "policy", Usage: "register an Organization policy service: ID=PUBKEYFILE (repeatable)"},
				&cli.BoolFlag{Name: "closed-registration", Usage: "refuse self-signed Agent Cards of unknown agents"},
				&cli.StringSliceFlag{Name: "enroll", Usage: "submit an agent's signed agent_card_register FILE at start (`run --enrollment`; repeatable)"},
				&cli.IntFlag{Name: "max-conns", Usage: "connections held at once, handshaking or not; more get HTTP 503 (docs/operations.md)", Value: 1024},
				&cli.IntFlag{Name: "max-conns-per-ip", Usage: "connections held at once per remote IP address; more get HTTP 503", Value: 64},
				&cli.DurationFlag{Name: "handshake-timeout", Usage: "time from TCP accept to a completed HELLO", Value: 10 * time.Second},
			},
			Action: serveAuthority,
		}},
	}
}

func serveAuthority(ctx context.Context, cmd *cli.Command) error {
	stderr := cmd.Root().ErrWriter
	fail := func(format string, args ...any) error {
		fmt.Fprintf(stderr, "authority serve: "+format+"\n", args...)
		return exitError{1}
	}
	limits := wss.Options{MaxConns: int(cmd.Int("max-conns")), MaxConnsPerIP: int(cmd.Int("max-conns-per-ip")), HandshakeTimeout: cmd.Duration("handshake-timeout")}
	if limits.MaxConns < 1 || limits.MaxConnsPerIP < 1 || limits.HandshakeTimeout <= 0 {
		return fail("--max-conns, --max-conns-per-ip and --handshake-timeout must be positive")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := cmd.String("data")
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc, err := authoritylite.Open(authoritylite.Config{Dir: dir, Logger: log, ClosedRegistration: cmd.Bool("closed-registration")})
	if err != nil {
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
	limits.Logger = log
	server := wss.NewServer(svc, limits)
	if err := server.Serve(ctx, ln); err != nil {
		return fail("%v", err)
	}
	return nil
}
