package slots

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/missionweave/mwp-worker/protocol"
)

// MaxFetchBytes bounds an artifact read through Work.FetchArtifact: its
// base64 in a fetched reply (4/3 of it) stays under MaxLineBytes, the
// line limit a program may also apply to what it reads.
const MaxFetchBytes = 8 << 20

// ArtifactReader is a Host that can return stored artifact bytes by
// digest (its local store, or the authority's). The slot checks the hash
// and the size; the Host need not.
type ArtifactReader interface {
	ReadArtifact(ctx context.Context, s Slot, digest string) ([]byte, error)
}

// Input returns the digest and the verified bytes of the contract input
// called name.
func (w *Work) Input(ctx context.Context, name string) (digest string, data []byte, err error) {
	for _, in := range w.Contract().Inputs {
		if in.Name == name {
			data, err := w.FetchArtifact(ctx, in.Artifact)
			return in.Artifact, data, err
		}
	}
	return "", nil, protocol.Errorf(protocol.CodeInvalidCommand, "slots: the contract of %s has no input called %q", w.r.slot.WorkItemID, name)
}

// FetchArtifact returns the bytes of one of the item's input artifacts.
// Only a digest the Work Contract names as an input may be read (no bytes
// of another WorkItem or Mission: spec 13.3 isolation), only under a live
// lease, at most MaxFetchBytes, and only bytes that hash to the digest
// (a retrieved artifact is verified, never trusted: spec 13.1).
func (w *Work) FetchArtifact(ctx context.Context, digest string) ([]byte, error) {
	r := w.r
	r.mu.Lock()
	err := w.activeLocked(r.pool.cfg.Clock.Now())
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !w.isInput(digest) {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "slots: %s is not an input of work item %s", digest, r.slot.WorkItemID)
	}
	src, ok := r.pool.cfg.Host.(ArtifactReader)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "slots: this worker cannot read artifacts")
	}
	data, err := src.ReadArtifact(ctx, r.slot, digest)
	if err != nil {
		return nil, fmt.Errorf("slots: artifact %s: %w", digest, err)
	}
	if len(data) > MaxFetchBytes {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "slots: artifact %s is %d bytes, over the fetch limit of %d", digest, len(data), MaxFetchBytes)
	}
	if got := protocol.Digest(data); got != digest {
		return nil, protocol.Errorf(protocol.CodeInternalError, "slots: artifact %s: the bytes read hash to %s", digest, got)
	}
	return data, nil
}

func (w *Work) isInput(digest string) bool {
	if digest == "" {
		return false
	}
	for _, in := range w.Contract().Inputs {
		if in.Artifact == digest {
			return true
		}
	}
	return false
}

// fetch answers a fetch request in its own goroutine: a read from the
// authority may take a while, and the serve loop must keep passing on a
// preemption meanwhile. Requests may overlap; their ids tell the replies
// apart.
func (s *session) fetch(ctx context.Context, m *fetchMsg) {
	go func() {
		var (
			d    = m.Digest
			data []byte
			err  error
		)
		if m.Name != "" {
			d, data, err = s.w.Input(ctx, m.Name)
		} else {
			data, err = s.w.FetchArtifact(ctx, d)
		}
		if err != nil {
			s.send(errorReply(m.ID, "fetch", err))
			return
		}
		b := base64.StdEncoding.EncodeToString(data)
		s.send(replyMsg{Type: "fetched", ID: m.ID, Name: m.Name, Digest: d, Data: &b})
	}()
}
