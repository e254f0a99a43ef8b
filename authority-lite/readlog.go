package authoritylite

import (
	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"

	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/storecheck"
)

// LogFile is the authority's store inside its data directory.
const LogFile = "authority.db"

// FindLog returns the authority log under dir: dir/authority.db, or
// dir/authority/authority.db (the layout of `mwp-worker poc --data DIR`).
func FindLog(dir string) (string, error) {
	for _, p := range []string{filepath.Join(dir, LogFile), filepath.Join(dir, "authority", LogFile)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s under %s", LogFile, dir)
}

// lockedLog is the error of an open that timed out on the log's lock: it
// names the process holding it, as the worker's store does.
func lockedLog(path string, err error) error {
	if _, who, ok := storecheck.Holder(path); ok {
		return fmt.Errorf("authority: %s is locked by %s; stop it first, or use another data directory: %w", path, who, err)
	}
	return fmt.Errorf("authority: %s is locked by another process (an authority, or a worker with its embedded one, on this data directory?): %w", path, err)
}

// ReadLog opens an authority log read-only (it fails after timeout while
// an authority holds it) and calls fn for every stored event: the
// Organization's first, then each Group's in sequence order, Groups by id.
func ReadLog(path string, timeout time.Duration, fn func(groupID string, raw []byte) error) error {
	if _, err := preOpen(path); err != nil {
		return err
	}
	db, err := storecheck.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("%s is held by a running authority", path)
		}
		return damaged(path, "", err)
	}
	defer db.Close()
	err = storecheck.Guard(func() error {
		return boltlog.Tree{DB: db}.View(func(tx logstore.Tx) error {
			if b := tx.Bucket(bucketLog); b != nil {
				var id LogIdentity
				if json.Unmarshal(b.Get(keyIdentity), &id) == nil {
					if err := checkHead(filepath.Dir(path), id, uint64(tx.ID())); err != nil {
						return err
					}
				}
			}
			return readAll(tx, fn)
		})
	})
	if storecheck.IsPanic(err) {
		return damaged(path, "", err)
	}
	return err
}

func readAll(tx logstore.Tx, fn func(groupID string, raw []byte) error) error {
	if org := tx.Bucket(bucketOrg); org != nil {
		if b := org.Bucket(bucketEvents); b != nil {
			if err := b.ForEach(func(_, v []byte) error { return fn("", v) }); err != nil {
				return err
			}
		}
	}
	groups := tx.Bucket(bucketGroups)
	if groups == nil {
		return nil
	}
	return groups.ForEachBucket(func(k []byte) error {
		g := groups.Bucket(k)
		b := g.Bucket(bucketEvents)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error { return fn(string(k), v) })
	})
}
