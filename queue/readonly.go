package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// Reader is a read-only view of a worker store, safe to use while the
// worker runs: when the worker holds the file, Reader works on a consistent
// copy the worker serves (see serve.go).
type Reader struct {
	db   *bolt.DB
	path string // the store file
	tmp  string // the copy, removed by Close
	live *liveStatus
}

// OpenReader opens DIR/worker.db read-only. If a running worker holds the
// file lock for longer than timeout, it asks that worker for a copy instead.
func OpenReader(dir string, timeout time.Duration) (*Reader, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("queue: no worker store: %w", err)
	}
	r := &Reader{path: path}
	if err := preOpen(path); err != nil {
		return nil, err
	}
	db, err := storecheck.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolt.ErrTimeout) {
		tmp, live, ferr := fetchCopy(dir, timeout)
		if ferr != nil {
			return nil, fmt.Errorf("queue: %s is locked by a running worker, and its copy failed: %w", path, ferr)
		}
		r.tmp, r.live = tmp, live
		db, err = storecheck.Open(tmp, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
		if err != nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		return nil, openErr(path, err)
	}
	r.db = db
	if err := r.view(checkSchema); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Live reports whether the data came from a running worker.
func (r *Reader) Live() bool { return r.live != nil }

// Close releases the file and removes a fetched copy.
func (r *Reader) Close() error {
	err := r.db.Close()
	if r.tmp != "" {
		os.Remove(r.tmp)
	}
	return err
}

// Report is what `mwp-worker inspect` prints.
type Report struct {
	Path      string        `json:"path"`
	Schema    uint64        `json:"schema"`
	Live      bool          `json:"live"` // copied from a running worker
	WorkerPID int           `json:"workerPid,omitempty"`
	Groups    []GroupReport `json:"groups"`
	Outbox    OutboxReport  `json:"outbox"`
	OrgEvents int           `json:"orgEvents"`
}

// GroupReport describes one Group.
type GroupReport struct {
	GroupID     string                `json:"groupId"`
	Cursor      uint64                `json:"cursor"`
	InboxEvents int                   `json:"inboxEvents"`
	InboxFirst  uint64                `json:"inboxFirst,omitempty"`
	InboxLast   uint64                `json:"inboxLast,omitempty"`
	Snapshot    *protocol.SnapshotRef `json:"snapshot,omitempty"`
	Mission     MissionView           `json:"mission"`
	Members     []Member              `json:"members"`
	Buffer      *BufferStatus         `json:"buffer,omitempty"` // live only
	// Divergence is set when the authority contradicted an applied event:
	// the Group applies nothing more until it is resynced.
	Divergence *Divergence  `json:"divergence,omitempty"`
	Items      []ItemReport `json:"items"`
}

// ItemReport is one queue entry as inspect shows it.
type ItemReport struct {
	WorkItemID     string                 `json:"workItemId"`
	State          protocol.WorkItemState `json:"state"`
	Urgency        protocol.Urgency       `json:"urgency,omitempty"`
	Deadline       protocol.Time          `json:"deadline,omitzero"`
	Owner          string                 `json:"owner,omitempty"`
	OwnershipEpoch uint64                 `json:"ownershipEpoch,omitempty"`
	LeaseID        string                 `json:"leaseId,omitempty"`
	LeaseExpiresAt protocol.Time          `json:"leaseExpiresAt,omitzero"`
}

// OutboxReport summarizes the pending Commands.
type OutboxReport struct {
	Pending  int           `json:"pending"`
	Commands []OutboxEntry `json:"commands"`
}

// Report reads everything inspect shows in one read transaction.
func (r *Reader) Report() (Report, error) {
	rep := Report{Path: r.path, Live: r.live != nil, Groups: []GroupReport{}, Outbox: OutboxReport{Commands: []OutboxEntry{}}}
	if r.live != nil {
		rep.WorkerPID = r.live.PID
	}
	err := r.view(func(tx *bolt.Tx) error {
		rep.Schema = getU64(tx.Bucket(bktMeta).Get(keySchema))
		rep.OrgEvents = tx.Bucket(bktOrg).Stats().KeyN
		err := tx.Bucket(bktGroups).ForEachBucket(func(name []byte) error {
			gr, err := groupReport(tx.Bucket(bktGroups).Bucket(name), string(name))
			if err != nil {
				return err
			}
			if r.live != nil {
				for _, b := range r.live.Buffers {
					if b.GroupID == gr.GroupID {
						b := b
						gr.Buffer = &b
					}
				}
			}
			rep.Groups = append(rep.Groups, gr)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bktOutbox).ForEach(func(k, v []byte) error {
			e, err := decodeOutbox(v)
			if err != nil {
				return err
			}
			e.Signed = nil
			rep.Outbox.Commands = append(rep.Outbox.Commands, e)
			return nil
		})
	})
	rep.Outbox.Pending = len(rep.Outbox.Commands)
	return rep, err
}

func groupReport(gb *bolt.Bucket, id string) (GroupReport, error) {
	g, err := loadGroup(gb, id)
	if err != nil {
		return GroupReport{}, err
	}
	gr := GroupReport{GroupID: id, Cursor: g.cursor, Snapshot: g.snapRef, Mission: g.mis, Members: sortedMembers(g.members), Divergence: g.diverged, Items: []ItemReport{}}
	if in := gb.Bucket(bktInbox); in != nil {
		c := in.Cursor()
		if k, _ := c.First(); k != nil {
			gr.InboxFirst = getU64(k)
		}
		if k, _ := c.Last(); k != nil {
			gr.InboxLast = getU64(k)
		}
		gr.InboxEvents = in.Stats().KeyN
	}
	for _, wid := range g.itemIDs() {
		e := g.items[wid]
		ir := ItemReport{WorkItemID: e.WorkItemID, State: e.State, Urgency: e.Urgency, Deadline: e.Deadline,
			Owner: e.Owner, OwnershipEpoch: e.OwnershipEpoch}
		if e.Lease != nil {
			ir.LeaseID, ir.LeaseExpiresAt = e.Lease.LeaseID, e.Lease.ExpiresAt
		}
		gr.Items = append(gr.Items, ir)
	}
	return gr, nil
}

// Items returns one Group's entries as stored, sorted by id.
func (r *Reader) Items(groupID string) ([]Entry, error) {
	var out []Entry
	err := r.view(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(groupID))
		if gb == nil {
			return fmt.Errorf("queue: unknown group %s", groupID)
		}
		q := gb.Bucket(bktQueue)
		if q == nil {
			return nil
		}
		return q.ForEach(func(_, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}
