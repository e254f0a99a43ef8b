package toolkeys

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Fence durably records that the ownership epochs of WorkItem workItemID
// below epoch are over: Do refuses their operations from now on. Fences
// only rise; a lower epoch than the recorded one changes nothing. An
// attempt already running is not interrupted.
func (l *Ledger) Fence(missionID, workItemID string, epoch uint64) error {
	if err := checkFenceArgs(missionID, workItemID, epoch); err != nil {
		return err
	}
	return l.db.Update(func(tx *bolt.Tx) error {
		cur, err := getFence(tx, missionID, workItemID)
		if err != nil || epoch <= cur {
			return err
		}
		return putFence(tx, missionID, workItemID, epoch)
	})
}

// FenceOf returns the lowest ownership epoch of the WorkItem that Do still
// accepts (0 if never fenced).
func (l *Ledger) FenceOf(missionID, workItemID string) (uint64, error) {
	if err := checkFenceArgs(missionID, workItemID, 0); err != nil {
		return 0, err
	}
	var epoch uint64
	err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		epoch, err = getFence(tx, missionID, workItemID)
		return err
	})
	return epoch, err
}

func checkFenceArgs(missionID, workItemID string, epoch uint64) error {
	if err := checkID("mission", missionID); err != nil {
		return err
	}
	if err := checkID("work item", workItemID); err != nil {
		return err
	}
	return checkEpoch(epoch)
}

// fenceKey is unambiguous for any pair of ids: JCS of a two-string array.
func fenceKey(missionID, workItemID string) []byte {
	k, _ := protocol.Canonical([]any{missionID, workItemID}) // strings never fail
	return k
}

func getFence(tx *bolt.Tx, missionID, workItemID string) (uint64, error) {
	v := tx.Bucket(bktRoot).Bucket(bktFences).Get(fenceKey(missionID, workItemID))
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("toolkeys: fence of %s/%s: %d bytes", missionID, workItemID, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func putFence(tx *bolt.Tx, missionID, workItemID string, epoch uint64) error {
	return tx.Bucket(bktRoot).Bucket(bktFences).Put(fenceKey(missionID, workItemID), u64(epoch))
}
