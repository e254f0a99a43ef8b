package workercmd

import (
	"context"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
)

// uploadTimeout bounds one upload or download (64 MiB at about 1 MB/s),
// dial included.
const uploadTimeout = 2 * time.Minute

// artifactLink is run's client of a remote authority's artifact route
// (docs/wire.md "Artifacts"), signed by the agent. It dials on first use,
// so a worker that starts before its authority is up is not held back.
type artifactLink struct {
	ctx context.Context
	cfg *runtime.WorkerConfig

	mu sync.Mutex
	a  *remote.Authority
}

// useRemoteArtifacts sets cfg's artifact hooks for a remote authority:
// handler outputs are uploaded (PUT /mwp/artifacts/DIGEST) and published
// with the URI it answers, as with the embedded authority, and a handler's
// fetch of an input is read back (GET /mwp/artifacts/DIGEST).
func useRemoteArtifacts(ctx context.Context, cfg *runtime.WorkerConfig) {
	l := &artifactLink{ctx: ctx, cfg: cfg}
	cfg.Artifacts = l.put
	cfg.FetchArtifact = l.get
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

func (l *artifactLink) put(data []byte) (string, bool, error) {
	// A hung authority fails this one upload, not the worker.
	ctx, cancel := context.WithTimeout(l.ctx, uploadTimeout)
	defer cancel()
	a, err := l.authority(ctx)
	if err != nil {
		return "", false, err
	}
	_, uri, err := a.PutArtifact(ctx, data)
	if err != nil {
		return "", false, err
	}
	return uri, true, nil
}

func (l *artifactLink) get(ctx context.Context, digest string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	a, err := l.authority(ctx)
	if err != nil {
		return nil, err
	}
	return a.Artifact(ctx, digest)
}
