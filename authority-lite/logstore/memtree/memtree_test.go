package memtree

import (
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/storetest"
)

// reopened is a closed tree opened again: the same memory, as a restart
// of a store that keeps it would read it back.
type reopened struct{ *Tree }

func (r reopened) Close() error { return nil }

func TestTree(t *testing.T) {
	storetest.RunTree(t, func(t *testing.T) storetest.TreeOpener {
		mem := New()
		return func(t *testing.T) logstore.Tree { return reopened{mem} }
	})
}
