package workercmd

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
)

// uploadTimeout bounds one try of an upload or download (64 MiB at about
// 1 MB/s), dial included.
const uploadTimeout = 2 * time.Minute

// artifactLink is run's client of a remote authority's artifact route
// (docs/wire.md "Artifacts"), signed by the agent. It dials on first use,
// so a worker that starts before its authority is up is not held back.
//
// A transfer that cannot reach the authority (remote.Transient: refused,
// reset, cut short, timed out, a 5xx, 429 or retryable Error) is tried
// again, with jittered back-off, for as long as the worker's offline grace
// (remote.Patience): both are content-addressed, so a repeat is safe, and
// a restart of the authority does not fail the handler waiting on it.
// Past the grace the handler gets remote.Unreachable, a retryable
// INTERNAL_ERROR; a refusal (a 4xx Error) it gets at once.
type artifactLink struct {
	ctx   context.Context
	cfg   *runtime.WorkerConfig
	rnd   func() float64 // jitter in [0, 1)
	first time.Duration  // the first wait (0: remote's default)

	// waits counts the waits for an unreachable authority, by transfer.
	waits *prometheus.CounterVec

	mu sync.Mutex
	a  *remote.Authority
}

// newWaits is mwp_worker_upload_waits_total (docs/operations.md
// "Metrics").
func newWaits() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mwp_worker_upload_waits_total",
		Help: "Waits of an artifact transfer for an authority it could not reach (refused, reset, timed out, 5xx, retryable Error), by transfer (upload, download); each wait is followed by another try.",
	}, []string{"transfer"})
}

// useRemoteArtifacts sets cfg's artifact hooks for a remote authority:
// handler outputs are uploaded (PUT /mwp/artifacts/DIGEST) and published
// with the URI it answers, as with the embedded authority, and a handler's
// fetch of an input is read back (GET /mwp/artifacts/DIGEST).
// It returns the link's metric.
func useRemoteArtifacts(ctx context.Context, cfg *runtime.WorkerConfig) prometheus.Collector {
	l := &artifactLink{ctx: ctx, cfg: cfg, rnd: rand.Float64, waits: newWaits()}
	cfg.Artifacts = l.put
	cfg.FetchArtifact = l.get
	if cfg.AuthorityKeys != nil { // a snapshot is restored only once verified
		cfg.Client.FetchSnapshot = l.snapshot
	}
	return l.waits
}

// authority dials once; a failed dial is tried again on the next use.
func (l *artifactLink) authority(ctx context.Context) (*remote.Authority, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.a != nil {
		return l.a, nil
	}
	cfg := l.cfg
	a, err := remote.Dial(ctx, remote.Config{URL: cfg.URL, Trust: cfg.Trust, AllowInsecureLoopback: cfg.AllowInsecureLoopback,
		Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: cfg.AgentID}, Key: cfg.Key, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	l.a = a
	return a, nil
}

// retry runs one transfer's tries (dial included) within the offline
// grace, each bounded by uploadTimeout.
func (l *artifactLink) retry(ctx context.Context, what, digest string, try func(ctx context.Context, a *remote.Authority) error) error {
	log := l.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	p := remote.Patience{Grace: offline.ClampGrace(l.cfg.OfflineGrace), First: l.first}
	waited := 0
	err := remote.Retry(ctx, l.cfg.Clock, p, l.rnd, func(tries int, wait time.Duration, err error) {
		waited = tries
		if l.waits != nil {
			l.waits.WithLabelValues(what).Inc()
		}
		if tries == 1 {
			log.Info("artifact "+what+" waiting for the authority", "artifact", digest, "grace", p.Grace, "err", err)
		} else {
			log.Debug("artifact "+what+" still waiting for the authority", "artifact", digest, "tries", tries, "wait", wait, "err", err)
		}
	}, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
		defer cancel()
		a, err := l.authority(ctx)
		if err != nil {
			return err
		}
		return try(ctx, a)
	})
	switch {
	case err != nil && remote.Transient(err):
		log.Warn("artifact "+what+" gave up: the authority stayed unreachable for the offline grace; the handler is told to retry", "artifact", digest, "err", err)
	case waited > 0:
		log.Info("artifact "+what+" reached the authority again", "artifact", digest, "tries", waited+1, "err", err)
	}
	return err
}

func (l *artifactLink) put(ctx context.Context, data []byte) (string, bool, error) {
	// A hung authority fails this one upload, not the worker; the run
	// ending (its lease lost, the worker stopping) ends the wait.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(l.ctx, stop)()
	var uri string
	err := l.retry(ctx, "upload", protocol.Digest(data), func(ctx context.Context, a *remote.Authority) (err error) {
		_, uri, err = a.PutArtifact(ctx, data)
		return err
	})
	if err != nil {
		return "", false, err
	}
	return uri, true, nil
}

func (l *artifactLink) get(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	err := l.retry(ctx, "download", digest, func(ctx context.Context, a *remote.Authority) (err error) {
		data, err = a.Artifact(ctx, digest)
		return err
	})
	return data, err
}

// snapshot downloads the Group Snapshot a CURSOR_TOO_OLD named (GET
// /mwp/groups/G/snapshots/DIGEST), waiting out an outage as a transfer
// does; the store checks it before restoring it.
func (l *artifactLink) snapshot(ctx context.Context, ref protocol.SnapshotRef) ([]byte, error) {
	var doc []byte
	err := l.retry(ctx, "snapshot", ref.Digest, func(ctx context.Context, a *remote.Authority) (err error) {
		doc, err = a.SnapshotDocument(ctx, ref)
		return err
	})
	return doc, err
}
