// Package embed runs authority-lite and its wss server in the caller's
// process: `mwp-worker run` without --authority, the proof of concept and
// the end-to-end tests. Workers still reach it over real wss with its
// certificate pinned, the same code path as a remote authority, so
// nothing is tested that production does not run. It sits beside the
// authority rather than in runtime so that the worker never links the
// authority it talks to.
package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/httpapi"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// Config configures an authority-lite served in this process.
type Config struct {
	// Dir is the authority's data directory (authority.db, its key, the
	// artifact store and its TLS certificate).
	Dir string
	// Listen is the address, default "127.0.0.1:0".
	Listen string
	Clock  clock.Clock
	Logger *slog.Logger
	Limits group.Limits
	// RateBurst and RateEvery bound each actor's messages and proposals
	// (authoritylite.Config; zero: its default of 60 a minute).
	RateBurst int
	RateEvery time.Duration
	// CreateBurst and CreateEvery bound each human's mission.create
	// (authoritylite.Config; zero: its default of 20, then one every 3 s).
	CreateBurst int
	CreateEvery time.Duration
	// Server tunes the WebSocket server (tests shorten its liveness).
	Server wss.Options
	// NoSync opens the log without fsync (authoritylite.Config.NoSync):
	// load generators measuring the cost of durability only.
	NoSync bool
	// RetainEvents, ArchiveAfter and PurgeAfter bound what the authority
	// keeps (authoritylite.Config's, docs/operations.md "Retention,
	// archiving and disk"). Zero keeps every event and never archives:
	// `run`, `up` and the proof of concept leave them so, their Missions
	// being few and short-lived; the soak sets them.
	RetainEvents uint64
	ArchiveAfter time.Duration
	PurgeAfter   time.Duration
	// ReceiptWindow shortens how long receipts are kept (tests only;
	// authoritylite.Config's).
	ReceiptWindow time.Duration
}

// Authority is authority-lite with its wss server on a loopback port.
// Only enrollment and artifact bytes use the Service directly.
type Authority struct {
	Service     *authoritylite.Service
	URL         string // wss://127.0.0.1:PORT/mwp
	Fingerprint string // sha256:… of the certificate, the pin a worker checks
	Addr        net.Addr

	server *wss.Server
	cancel context.CancelFunc
	done   chan error
}

// Start opens the authority in cfg.Dir and serves it.
func Start(cfg Config) (*Authority, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	svc, err := authoritylite.Open(authoritylite.Config{Dir: cfg.Dir, Clock: cfg.Clock, Logger: cfg.Logger, Limits: cfg.Limits,
		RateBurst: cfg.RateBurst, RateEvery: cfg.RateEvery, CreateBurst: cfg.CreateBurst, CreateEvery: cfg.CreateEvery, NoSync: cfg.NoSync,
		RetainEvents: cfg.RetainEvents, ArchiveAfter: cfg.ArchiveAfter, PurgeAfter: cfg.PurgeAfter, ReceiptWindow: cfg.ReceiptWindow})
	if err != nil {
		return nil, err
	}
	cert, fp, err := wss.LoadOrCreateCert(cfg.Dir)
	if err != nil {
		svc.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := wss.Listen(ctx, cfg.Listen, wss.ListenOptions{Certificate: &cert})
	if err != nil {
		cancel()
		svc.Close()
		return nil, err
	}
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = cfg.Logger
	}
	if cfg.Server.Routes == nil {
		cfg.Server.Routes = httpapi.New(svc)
	}
	e := &Authority{
		Service: svc, URL: fmt.Sprintf("wss://%s%s", ln.Addr(), wss.Path), Fingerprint: fp, Addr: ln.Addr(),
		server: wss.NewServer(svc, cfg.Server), cancel: cancel, done: make(chan error, 1),
	}
	go func() { e.done <- e.server.Serve(ctx, ln) }()
	return e, nil
}

// Endpoint is where a worker dials and the certificate pin it checks.
func (e *Authority) Endpoint() (url, pin string) { return e.URL, e.Fingerprint }

// Keys verifies the authority's events.
func (e *Authority) Keys() protocol.KeyResolver {
	return protocol.NewKeySet(e.Service.PublicKey())
}

// Enroll submits an agent's own signed agent_card_register in process:
// the binding cannot authenticate an agent the authority does not know.
func (e *Authority) Enroll(ctx context.Context, signedRegister []byte) error {
	_, err := e.Service.Submit(ctx, "", signedRegister)
	return err
}

// Artifacts stores bytes in the authority's artifact store and publishes
// their manifest with an "mwp-artifact:" URI.
func (e *Authority) Artifacts(data []byte) (string, bool, error) {
	d, err := e.Service.PutArtifact(data)
	if err != nil {
		return "", false, err
	}
	return protocol.ArtifactURI(d), true, nil
}

// ReadArtifact returns stored bytes to agentID when it may read them (a
// member of a Group where they are published), as the HTTPS artifact
// route answers a remote worker.
func (e *Authority) ReadArtifact(_ context.Context, agentID, digest string) ([]byte, error) {
	return e.Service.ReadArtifact(protocol.Actor{Kind: protocol.ActorAgent, ID: agentID}, nil, digest)
}

// Close stops the server (open connections get 1001) and closes the store.
func (e *Authority) Close() error {
	e.cancel()
	err := <-e.done
	e.done <- err
	return errors.Join(err, e.Service.Close())
}

// Snapshot returns a stored Group Snapshot document by the reference a
// CURSOR_TOO_OLD named: an in-process worker restores it
// (runtime.WorkerConfig.UseInProcess).
func (a *Authority) Snapshot(ref protocol.SnapshotRef) ([]byte, error) {
	return a.Service.Snapshot(ref)
}
