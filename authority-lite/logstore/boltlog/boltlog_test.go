package boltlog

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/storetest"
)

func opener(t *testing.T) storetest.Opener {
	path := filepath.Join(t.TempDir(), "authority.db")
	return func(t *testing.T) logstore.Store {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestStore(t *testing.T) { storetest.Run(t, opener) }

func TestTree(t *testing.T) {
	storetest.RunTree(t, func(t *testing.T) storetest.TreeOpener {
		path := filepath.Join(t.TempDir(), "authority.db")
		return func(t *testing.T) logstore.Tree {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			return Tree{DB: db}
		}
	})
}
