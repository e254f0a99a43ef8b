package boltlog

import (
	"path/filepath"
	"testing"

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
