package toolkeys

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ForgetMission deletes the records and fences of a finished Mission's
// operations, in one transaction, and returns how many records went. Call
// it only once nothing of the Mission can run again on this worker (the
// runtime forgets a Group whose Mission is terminal and holds nothing of
// it): a later operation of the Mission would no longer find its first
// result. Keys are hashes, so this reads every record.
func (l *Ledger) ForgetMission(missionID string) (int, error) {
	n := 0
	err := l.db.Update(func(tx *bolt.Tx) error {
		n = 0
		root := tx.Bucket(bktRoot)
		var doomed [][]byte
		recs := root.Bucket(bktRecords)
		if err := recs.ForEach(func(k, v []byte) error {
			var r struct {
				Op Op `json:"op"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			if r.Op.MissionID == missionID {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range doomed {
			if err := recs.Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		doomed = doomed[:0]
		fences := root.Bucket(bktFences)
		if err := fences.ForEach(func(k, _ []byte) error {
			var ids []string
			if json.Unmarshal(k, &ids) == nil && len(ids) == 2 && ids[0] == missionID {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range doomed {
			if err := fences.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("toolkeys: forget mission %s: %w", missionID, err)
	}
	return n, nil
}
