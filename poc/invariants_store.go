package poc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// CheckWorkerStores: no worker applied an event twice. Each worker store
// is opened read-only (queue.OpenReader checks its schema version); per
// Group its inbox holds each sequence once, contiguous from the snapshot
// base to the durable cursor, every stored event is the one for its
// sequence and Group, every event id appears once, and the dedupe index
// maps each id to its one sequence. The inbox is read with bbolt directly,
// following the layout queue/doc.go documents for schema version 1,
// because queue.Reader does not list inbox contents.
func CheckWorkerStores(dirs []string) InvariantResult {
	var problems []string
	events, groups := 0, 0
	for _, dir := range dirs {
		r, err := queue.OpenReader(dir, 2*time.Second)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		rep, err := r.Report()
		r.Close()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		if rep.Schema != queue.SchemaVersion {
			problems = append(problems, fmt.Sprintf("%s: schema %d", dir, rep.Schema))
			continue
		}
		n, ps := checkInboxes(filepath.Join(dir, queue.FileName), rep.Groups)
		problems = append(problems, ps...)
		events += n
		groups += len(rep.Groups)
	}
	return result(InvAppliedOnce, problems, fmt.Sprintf("%d worker stores, %d Group inboxes, %d events each applied once in sequence", len(dirs), groups, events))
}

func checkInboxes(path string, groups []queue.GroupReport) (int, []string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return 0, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	defer db.Close()
	var problems []string
	total := 0
	err = db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte("groups"))
		if root == nil {
			return fmt.Errorf("no groups bucket")
		}
		for _, g := range groups {
			gb := root.Bucket([]byte(g.GroupID))
			if gb == nil {
				problems = append(problems, fmt.Sprintf("%s: group %s vanished", path, g.GroupID))
				continue
			}
			n, ps := checkInbox(g, gb)
			total += n
			for _, p := range ps {
				problems = append(problems, fmt.Sprintf("%s %s: %s", filepath.Base(filepath.Dir(path)), g.GroupID, p))
			}
		}
		return nil
	})
	if err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", path, err))
	}
	return total, problems
}

func checkInbox(g queue.GroupReport, gb *bolt.Bucket) (int, []string) {
	var problems []string
	var base uint64
	if meta := gb.Bucket([]byte("meta")); meta != nil {
		if b := meta.Get([]byte("base")); len(b) == 8 {
			base = binary.BigEndian.Uint64(b)
		}
	}
	inbox, index := gb.Bucket([]byte("inbox")), gb.Bucket([]byte("events"))
	if inbox == nil {
		return 0, nil
	}
	ids := map[string]uint64{}
	next := base + 1
	n := 0
	err := inbox.ForEach(func(k, v []byte) error {
		seq := binary.BigEndian.Uint64(k)
		if seq != next {
			problems = append(problems, fmt.Sprintf("inbox jumps from %d to %d", next-1, seq))
		}
		next = seq + 1
		n++
		var ev protocol.Event
		if err := json.Unmarshal(v, &ev); err != nil {
			problems = append(problems, fmt.Sprintf("inbox %d: %v", seq, err))
			return nil
		}
		if ev.Seq() != seq || ev.GroupID != g.GroupID {
			problems = append(problems, fmt.Sprintf("inbox %d holds %s/%d", seq, ev.GroupID, ev.Seq()))
		}
		if first, dup := ids[ev.EventID]; dup {
			problems = append(problems, fmt.Sprintf("event %s applied at %d and %d", ev.EventID, first, seq))
		}
		ids[ev.EventID] = seq
		if index != nil && !bytes.Equal(index.Get([]byte(ev.EventID)), k) {
			problems = append(problems, fmt.Sprintf("dedupe index does not map %s to %d", ev.EventID, seq))
		}
		return nil
	})
	if err != nil {
		problems = append(problems, err.Error())
	}
	if n > 0 && next-1 != g.Cursor {
		problems = append(problems, fmt.Sprintf("cursor %d, inbox ends at %d", g.Cursor, next-1))
	}
	if index != nil && index.Stats().KeyN != n {
		problems = append(problems, fmt.Sprintf("dedupe index has %d ids for %d events", index.Stats().KeyN, n))
	}
	return n, problems
}
