package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// The notices' durable state, in the worker's bbolt file (one runtime-owned
// top-level bucket next to the queue's):
//
//	notices/
//	  records/    messageId -> noticeRecord (JSON)
//	  baselines/  groupId 0x00 workItemId -> baseline (JSON)
//
// A record is written pending before its command is sent and settled by
// the authority's answer, so a notice decided once is posted once: after a
// crash the pending ones are sent again under their derived ids, and a
// second judgement of the same offer finds its record. A baseline is the
// disclosure last published for an accepted, not yet started item.

var (
	bktNotices   = []byte("notices")
	bktRecords   = []byte("records")
	bktBaselines = []byte("baselines")
)

// Notice states.
const (
	noticePending = "pending" // decided; not answered yet
	noticePosted  = "posted"  // in the Group log (or already was)
	noticeDropped = "dropped" // refused by the authority or unsendable; final
	noticeSkipped = "skipped" // Status only: judged again, record found
)

// noticeRetention is how long settled records are kept. A refusal judged
// again after that posts under the same ids, which the authority refuses
// as a used actionId: still one message.
const noticeRetention = 7 * 24 * time.Hour

type noticeRecord struct {
	Kind       string          `json:"kind"`
	GroupID    string          `json:"groupId"`
	WorkItemID string          `json:"workItemId"`
	OfferID    string          `json:"offerId,omitempty"`
	MissionID  string          `json:"missionId,omitempty"`
	MessageID  string          `json:"messageId"`
	ActionID   string          `json:"actionId"`
	Text       string          `json:"text"`
	Object     json.RawMessage `json:"object"` // JCS bytes
	Why        string          `json:"why,omitempty"`
	State      string          `json:"state"`
	Err        string          `json:"error,omitempty"`
	At         time.Time       `json:"at"`
}

type baseline struct {
	Disclosure  protocol.ScheduleDisclosure `json:"disclosure"`
	PublishedAt time.Time                   `json:"publishedAt"`
}

type noticeStore struct{ db *bolt.DB }

// openNoticeStore creates the buckets if needed and drops settled records
// older than the retention.
func openNoticeStore(db *bolt.DB, now time.Time) (*noticeStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bktNotices)
		if err != nil {
			return err
		}
		recs, err := root.CreateBucketIfNotExists(bktRecords)
		if err != nil {
			return err
		}
		if _, err := root.CreateBucketIfNotExists(bktBaselines); err != nil {
			return err
		}
		var old [][]byte
		err = recs.ForEach(func(k, v []byte) error {
			var r noticeRecord
			if json.Unmarshal(v, &r) != nil || (r.State != noticePending && r.At.Before(now.Add(-noticeRetention))) {
				old = append(old, slices.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := recs.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &noticeStore{db: db}, nil
}

func (s *noticeStore) bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	return tx.Bucket(bktNotices).Bucket(name)
}

func (s *noticeStore) put(r noticeRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return s.bucket(tx, bktRecords).Put([]byte(r.MessageID), v)
	})
}

func (s *noticeStore) get(messageID string) (noticeRecord, bool, error) {
	var r noticeRecord
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		v := s.bucket(tx, bktRecords).Get([]byte(messageID))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &r)
	})
	return r, found, err
}

// pending returns the records not yet answered, oldest first.
func (s *noticeStore) pending() ([]noticeRecord, error) {
	var out []noticeRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return s.bucket(tx, bktRecords).ForEach(func(_, v []byte) error {
			var r noticeRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.State == noticePending {
				out = append(out, r)
			}
			return nil
		})
	})
	slices.SortStableFunc(out, func(a, b noticeRecord) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.MessageID, b.MessageID)
	})
	return out, err
}

func baselineKey(k itemKey) []byte { return []byte(k.group + "\x00" + k.id) }

func (s *noticeStore) putBaseline(k itemKey, b baseline) error {
	v, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return s.bucket(tx, bktBaselines).Put(baselineKey(k), v)
	})
}

func (s *noticeStore) deleteBaseline(k itemKey) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return s.bucket(tx, bktBaselines).Delete(baselineKey(k))
	})
}

func (s *noticeStore) baselines() (map[itemKey]baseline, error) {
	out := map[itemKey]baseline{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return s.bucket(tx, bktBaselines).ForEach(func(k, v []byte) error {
			g, id, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return errors.New("runtime: malformed notice baseline key")
			}
			var b baseline
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			out[itemKey{string(g), string(id)}] = b
			return nil
		})
	})
	return out, err
}
