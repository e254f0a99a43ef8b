package runtime

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// A handler's fetch is answered from the worker's own artifact store
// first, then from the authority's; a malformed digest reads nothing.
func TestHostReadArtifact(t *testing.T) {
	dir := t.TempDir()
	local, _, err := storeArtifact(dir, []byte("kept here"))
	if err != nil {
		t.Fatal(err)
	}
	remote := protocol.Digest([]byte("at the authority"))
	var asked []string
	fetch := func(_ context.Context, d string) ([]byte, error) {
		asked = append(asked, d)
		if d == remote {
			return []byte("at the authority"), nil
		}
		return nil, errors.New("not in the store")
	}
	cases := []struct {
		name   string
		digest string
		fetch  func(context.Context, string) ([]byte, error)
		want   string
		code   protocol.Code
		asked  int
	}{
		{name: "own store", digest: local, fetch: fetch, want: "kept here"},
		{name: "authority", digest: remote, fetch: fetch, want: "at the authority", asked: 1},
		{name: "neither", digest: protocol.Digest([]byte("nowhere")), fetch: fetch, code: protocol.CodeInternalError, asked: 1},
		{name: "no authority store", digest: remote, code: protocol.CodeInvalidCommand},
		{name: "not a digest", digest: "sha256:../../session.json", fetch: fetch, code: protocol.CodeInvalidCommand},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			h := &host{e: &engine{cfg: WorkerConfig{Dir: dir, FetchArtifact: tc.fetch}, log: slog.New(slog.DiscardHandler)}}
			var _ slots.ArtifactReader = h
			got, err := h.ReadArtifact(context.Background(), slots.Slot{}, tc.digest)
			if tc.code != "" {
				if err == nil || protocol.CodeOf(err) != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
			} else if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v", got, err)
			}
			if len(asked) != tc.asked {
				t.Fatalf("the authority was asked %d times, want %d", len(asked), tc.asked)
			}
		})
	}
}
