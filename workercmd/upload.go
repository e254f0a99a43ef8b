package workercmd

import (
	"context"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
)

// uploadTimeout bounds one upload (64 MiB at about 1 MB/s), dial included.
const uploadTimeout = 2 * time.Minute

// remoteArtifacts is run's artifact hook for a remote authority: handler
// outputs are uploaded to its artifact route (PUT /mwp/artifacts/DIGEST,
// signed by the agent, docs/wire.md "Artifacts") and published with the
// URI it answers, as with the embedded authority. It dials on first use,
// so a worker that starts before its authority is up is not held back.
func remoteArtifacts(ctx context.Context, cfg *runtime.WorkerConfig) func(data []byte) (string, bool, error) {
	var (
		mu sync.Mutex
		a  *remote.Authority
	)
	return func(data []byte) (string, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		// A hung authority fails this one upload, not the worker.
		ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
		defer cancel()
		if a == nil {
			var err error
			a, err = remote.Dial(ctx, remote.Config{URL: cfg.URL, Trust: cfg.Trust, AllowInsecureLoopback: cfg.AllowInsecureLoopback,
				Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: cfg.AgentID}, Key: cfg.Key, Logger: cfg.Logger})
			if err != nil {
				return "", false, err
			}
		}
		_, uri, err := a.PutArtifact(ctx, data)
		if err != nil {
			return "", false, err
		}
		return uri, true, nil
	}
}
