package jslog

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/storetest"
	"github.com/missionweave/mwp-worker/internal/natstest"
)

// opener gives each subtest a stream of its own on the same servers.
func opener(url string, replicas int) func(t *testing.T) storetest.Opener {
	n := 0
	return func(t *testing.T) storetest.Opener {
		n++
		name := fmt.Sprintf("MWP%d", n)
		return func(t *testing.T) logstore.Store {
			s, err := Open(context.Background(), Config{URLs: url, Stream: name, Subjects: strings.ToLower(name), Replicas: replicas})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
}

func TestStore(t *testing.T) {
	storetest.Run(t, opener(natstest.Server(t), 1))
}

func TestStoreCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	storetest.Run(t, opener(natstest.Cluster(t, 3), 3))
}

func TestToken(t *testing.T) {
	for _, id := range []string{"grp-1_a", "", "a.b", "agent\x00a1\x00act", "=x", "*", ">"} {
		tok := token(id)
		back, err := untoken(tok)
		if err != nil || back != id {
			t.Fatalf("token(%q) = %q reads back %q, %v", id, tok, back, err)
		}
		for _, c := range tok {
			if c == '.' || c == '*' || c == '>' || c <= ' ' {
				t.Fatalf("token(%q) = %q is not one subject token", id, tok)
			}
		}
	}
}
