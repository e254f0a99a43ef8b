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
	"github.com/missionweave/mwp-worker/protocol"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Check verifies a stopped authority's log at path in full: its meta
// pages, bbolt's structural check, the identity against the key beside it
// (authority.pub), the head file, and every stored event: each Group's
// sequences without a gap from its first online event, every Group and
// Organization event's signature by the event key. Damage is reported,
// never returned as an error; an error means the check could not run
// (the file is missing, or held by a running authority past timeout).
func Check(path string, timeout time.Duration) (rep storecheck.Report, err error) {
	rep = storecheck.Report{Path: path, Store: "authority"}
	defer rep.Finish()
	dir := filepath.Dir(path)
	ms, err := storecheck.ReadMeta(path)
	if err != nil {
		return rep, err
	}
	rep.Meta = ms
	for _, p := range ms.Problems() {
		rep.Add(storecheck.Problem{Where: "meta", What: p})
	}
	if ms.Used < 0 || ms.Truncated() {
		return rep, nil
	}
	var keys protocol.KeyResolver
	pub, err := EventKey(dir)
	if err == nil {
		keys = protocol.NewKeySet(pub)
		rep.SignaturesChecked = true
	} else {
		rep.Notes = append(rep.Notes, fmt.Sprintf("signatures not checked: %v", err))
	}
	db, err := storecheck.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return rep, fmt.Errorf("%s is held by a running authority: stop it first", path)
		}
		rep.Add(storecheck.Problem{Where: "file", What: err.Error()})
		return rep, nil
	}
	defer db.Close()
	tree := boltlog.Tree{DB: db}
	structure := storecheck.Pages(path, ms)
	if len(structure) == 0 {
		err = storecheck.Guard(func() error {
			return db.View(func(tx *bolt.Tx) error { structure = storecheck.Structure(tx); return nil })
		})
		rep.StructureChecked = err == nil
		if err != nil {
			rep.Add(storecheck.Problem{Where: "structure", What: err.Error()})
		}
	}
	for _, p := range structure {
		rep.Add(storecheck.Problem{Where: "structure", What: p})
	}
	var id LogIdentity
	var ids []string
	err = storecheck.Guard(func() error {
		return tree.View(func(tx logstore.Tx) error {
			if b := tx.Bucket(bucketLog); b != nil {
				if err := json.Unmarshal(b.Get(keyIdentity), &id); err != nil {
					return fmt.Errorf("log identity: %v", err)
				}
			}
			if g := tx.Bucket(bucketGroups); g != nil {
				return g.ForEachBucket(func(k []byte) error { ids = append(ids, string(k)); return nil })
			}
			return nil
		})
	})
	if err != nil {
		rep.Add(storecheck.Problem{Where: "file", What: err.Error()})
		return rep, nil
	}
	reportIdentity(&rep, id, keys != nil, pub, dir, ms.Txid())
	checkOrg(tree, keys, &rep)
	for _, gid := range ids {
		run := storecheck.Run{GroupID: gid, Keys: keys}
		err := storecheck.Guard(func() error {
			return tree.View(func(tx logstore.Tx) error {
				gb, err := openGroupBuckets(tx, gid, false)
				if err != nil || gb == nil {
					return fmt.Errorf("buckets: %v", err)
				}
				run.Next, _ = onlineFrom(gb)
				c := gb.events.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					run.Add(k, v)
				}
				return nil
			})
		})
		if err != nil {
			run.Fail(0, "%v", err)
		}
		gr, ps := run.Report()
		rep.Groups = append(rep.Groups, gr)
		rep.Problems = append(rep.Problems, ps...)
	}
	return rep, nil
}

// reportIdentity notes the log's identity and reports a key other than
// the one beside it (when checked), and commits the head file says the
// log lost.
func reportIdentity(rep *storecheck.Report, id LogIdentity, checkKey bool, pub protocol.VerifyingKey, dir string, txid uint64) {
	if id.LogID == "" {
		rep.Notes = append(rep.Notes, "the log records no identity (written before identities; the next serve records one)")
		return
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("log %s created %s for key %s", id.LogID, id.CreatedAt.Format(time.RFC3339), id.KeyID))
	if checkKey && !id.sameKey(pub) {
		rep.Add(storecheck.Problem{Where: "identity", What: fmt.Sprintf("the log was created for key %s, authority.pub beside it is %s (or another key under that id)", id.KeyID, pub.KeyID)})
	}
	logID, last, ok := readHead(dir)
	switch {
	case !ok || logID != id.LogID:
	case txid < last:
		rep.Add(storecheck.Problem{Where: "head", What: fmt.Sprintf("the log opens at transaction %d, %s records %d committed: %d commits are lost", txid, HeadFile, last, last-txid)})
	default:
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s records transaction %d; the log is at %d", HeadFile, last, txid))
	}
}

// EventKey is the key that signs the events of the log in dir: the
// authority.pub beside it, else the public half of its authority.key.
func EventKey(dir string) (protocol.VerifyingKey, error) {
	pub, err := protocol.LoadPublicKey(filepath.Join(dir, "authority.pub"))
	if err != nil {
		if k, kerr := protocol.LoadPrivateKey(filepath.Join(dir, KeyFile)); kerr == nil {
			return k.Public(), nil
		}
	}
	return pub, err
}

// checkOrg verifies the Organization's events.
func checkOrg(db logstore.Tree, keys protocol.KeyResolver, rep *storecheck.Report) {
	err := storecheck.Guard(func() error {
		return db.View(func(tx logstore.Tx) error {
			org := tx.Bucket(bucketOrg)
			if org == nil || org.Bucket(bucketEvents) == nil {
				return nil
			}
			return org.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
				rep.OrgEvents++
				if _, err := storecheck.Event(v, keys); err != nil && len(rep.Problems) < storecheck.MaxProblems {
					rep.Add(storecheck.Problem{Where: "org", What: fmt.Sprintf("event %x: %v", k, err)})
				}
				return nil
			})
		})
	})
	if err != nil {
		rep.Add(storecheck.Problem{Where: "org", What: err.Error()})
	}
}

// FindLogOrDir is FindLog that also accepts the path of the file itself.
func FindLogOrDir(p string) (string, error) {
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p, nil
	}
	return FindLog(p)
}

// CompactLog gives the free pages of a stopped authority's log back to the
// file system (storecheck.CompactFile: bbolt.Compact into a copy, swapped
// in atomically). The copy starts its transaction ids over, so before the
// swap DIR/authority.head is replaced to record the copy's: a crash before
// the swap leaves the old log, newer than that head, and after it the new
// log, equal to it; neither is taken for a rolled-back log.
func CompactLog(path string, timeout time.Duration) (storecheck.CompactResult, error) {
	return storecheck.CompactFile(path, timeout, func(tmp string) error { return compactHead(filepath.Dir(path), tmp) })
}

// compactHead records the compacted copy tmp's last transaction in dir's
// head file (or removes the head of a log without identity).
func compactHead(dir, tmp string) error {
	ms, err := storecheck.ReadMeta(tmp)
	if err != nil {
		return err
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	var id LogIdentity
	err = boltlog.Tree{DB: db}.View(func(tx logstore.Tx) error {
		if b := tx.Bucket(bucketLog); b != nil && b.Get(keyIdentity) != nil {
			return json.Unmarshal(b.Get(keyIdentity), &id)
		}
		return nil
	})
	db.Close()
	if err != nil {
		return err
	}
	if id.LogID == "" {
		if err := os.Remove(headPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.WriteFile(headPath(dir), fmt.Appendf(nil, "%s %020d\n", id.LogID, ms.Txid()), 0o600)
}
