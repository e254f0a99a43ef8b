package httpapi

import (
	"crypto/rand"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

var (
	keyOnce sync.Once
	key     protocol.PrivateKey
)

func testKey(t *testing.T) protocol.PrivateKey {
	keyOnce.Do(func() {
		var err error
		if key, err = protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorHuman, "alice", "k1"), rand.Reader); err != nil {
			t.Fatal(err)
		}
	})
	return key
}
