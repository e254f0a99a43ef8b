package storecheck

import (
	"encoding/binary"
	"fmt"
	"os"
)

// CommittedSuffix names the file beside a bbolt file in which a build with
// the powerloss tag records the last transaction whose Commit returned
// (8 bytes, little-endian, written without fsync; recorder.go). Other
// builds never write it.
const CommittedSuffix = ".committed"

// LastCommitted reads that record: 0 when there is none.
func LastCommitted(path string) (uint64, error) {
	b, err := os.ReadFile(path + CommittedSuffix)
	switch {
	case os.IsNotExist(err):
		return 0, nil
	case err != nil:
		return 0, err
	case len(b) != 8:
		return 0, fmt.Errorf("storecheck: %s%s holds %d bytes, want 8", path, CommittedSuffix, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// LosePower turns the bbolt file at path, as a killed process left it,
// into what a power loss at the same instant may leave: bbolt writes a
// transaction's pages, fdatasyncs, writes its meta page and fdatasyncs
// again, and one transaction writes at a time. So every commit but the
// newest meta page's is on disk, and the newest one is too once its Commit
// returned or the next writer began its commit (LastCommitted). A newest commit newer than that record may not
// have reached the disk: unless keep, its meta page is given the older
// meta page's contents, and bbolt opens at the older transaction, as after
// a power loss that took the unsynced meta write (its data pages lie in
// pages free at the older transaction, unread). It reports the transaction
// the file now opens at and whether a commit was lost.
func LosePower(path string, keep bool) (txid uint64, lost bool, err error) {
	m, err := ReadMeta(path)
	if err != nil {
		return 0, false, err
	}
	if m.Used < 0 {
		return 0, false, fmt.Errorf("storecheck: %s: neither meta page is valid", path)
	}
	committed, err := LastCommitted(path)
	if err != nil {
		return 0, false, err
	}
	newest, older := m.Pages[m.Used], m.Pages[1-m.Used]
	if keep || newest.Txid <= committed || !older.Valid {
		return newest.Txid, false, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	body := make([]byte, metaSize)
	if _, err := f.ReadAt(body, int64(older.Page*m.PageSize+pageHeader)); err != nil {
		return 0, false, err
	}
	if _, err := f.WriteAt(body, int64(newest.Page*m.PageSize+pageHeader)); err != nil {
		return 0, false, err
	}
	return older.Txid, true, f.Sync()
}
