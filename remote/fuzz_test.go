package remote

import (
	"crypto/rand"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// FuzzAnswers feeds arbitrary answer bodies to the decoders of what the
// authority sends back: an events page and a refusal. Neither panics; a
// page is accepted only with every event verified, of the Group, in order.
func FuzzAnswers(f *testing.F) {
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, "authority-1", "k1"), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	keys := protocol.NewKeySet(k.Public())
	for _, s := range []string{`{"events":[]}`, `{"events":[{}]}`, `{"events":[{"sequence":1}]}`, `{"events":null}`, `[]`, ``,
		`{"code":"GROUP_NOT_FOUND","message":"group g not found","retryable":false,"details":{"pointer":"/groupId"}}`,
		`{"code":"NOPE","message":"x"}`, `{"code":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if evs, err := decodePage(b, "grp-a", 0, keys); err == nil {
			last := uint64(0)
			for _, e := range evs {
				if e.Sequence <= last {
					t.Fatalf("accepted sequences out of order: %v", evs)
				}
				last = e.Sequence
			}
		}
		if err := answerError(422, "", b); err == nil {
			t.Fatal("a refusal decoded to no error")
		}
	})
}
