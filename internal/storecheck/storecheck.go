// Package storecheck is what the two bbolt stores (the authority's log and
// the worker's store) need to meet a damaged file without crashing. bbolt
// trusts its pages: a zeroed or garbled page makes it panic inside View,
// Update or a cursor step, and a page past the end of a truncated file is a
// memory fault in its mmap. Guard turns both into an error; ReadMeta reads
// the file's two meta pages itself, to tell a truncated file before bbolt
// touches it and to say which meta page (which transaction) bbolt opens
// with; Structure runs bbolt's own consistency check.
package storecheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// PanicError is a panic or memory fault caught by Guard.
type PanicError struct{ Value string }

func (e *PanicError) Error() string { return "bbolt panicked on a damaged page: " + e.Value }

// Guard runs fn and returns its error, or a *PanicError when fn panicked or
// faulted on the store's memory map. Call it around every transaction: the
// deferred rollback inside View and Update has run by the time the panic
// reaches Guard, so the DB's locks are released.
func Guard(fn func() error) (err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			err = &PanicError{Value: fmt.Sprint(r)}
		}
	}()
	return fn()
}

// IsPanic reports whether err came from a caught panic.
func IsPanic(err error) bool {
	var pe *PanicError
	return errors.As(err, &pe)
}

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common): a 16-byte
// page header, then magic, version, pageSize, flags (uint32 each), the root
// bucket (pgid, sequence), freelist pgid, high-water pgid, txid and an
// FNV-64a checksum of everything before it. Little-endian, as bbolt writes
// it on the platforms we build for.
const (
	pageHeader  = 16
	metaSize    = 64
	metaSummed  = 56
	boltMagic   = 0xED0CDAED
	boltVersion = 2
)

// MetaPage is one of the two meta pages.
type MetaPage struct {
	Page  int    `json:"page"`
	Valid bool   `json:"valid"`
	Txid  uint64 `json:"txid"`
	// HighWater is the first page id past the file's used pages.
	HighWater uint64 `json:"highWater"`
	Problem   string `json:"problem,omitempty"`
	pageSize  int
	root      uint64 // the root bucket's page
	freelist  uint64
}

// Metas is what the two meta pages say.
type Metas struct {
	Pages    [2]MetaPage `json:"pages"`
	Used     int         `json:"used"` // the page bbolt opens with; -1 when neither is valid
	PageSize int         `json:"pageSize"`
	FileSize int64       `json:"fileSize"`
}

// Txid is the transaction bbolt opens at (0 when neither page is valid).
func (m Metas) Txid() uint64 {
	if m.Used < 0 {
		return 0
	}
	return m.Pages[m.Used].Txid
}

func readMeta(f *os.File, page int, off int64) MetaPage {
	mp := MetaPage{Page: page}
	var b [pageHeader + metaSize]byte
	if n, err := f.ReadAt(b[:], off); n < len(b) {
		mp.Problem = fmt.Sprintf("unreadable at offset %d: %v", off, err)
		return mp
	}
	m := b[pageHeader:]
	le := binary.LittleEndian
	mp.pageSize = int(le.Uint32(m[8:]))
	mp.root, mp.freelist = le.Uint64(m[16:]), le.Uint64(m[32:])
	mp.HighWater, mp.Txid = le.Uint64(m[40:]), le.Uint64(m[48:])
	h := fnv.New64a()
	h.Write(m[:metaSummed])
	switch {
	case le.Uint32(m[0:]) != boltMagic:
		mp.Problem = "not a bbolt meta page (magic)"
	case le.Uint32(m[4:]) != boltVersion:
		mp.Problem = fmt.Sprintf("bbolt version %d", le.Uint32(m[4:]))
	case le.Uint64(m[56:]) != h.Sum64():
		mp.Problem = "checksum mismatch"
	default:
		mp.Valid = true
	}
	return mp
}

// ReadMeta reads the two meta pages of the bbolt file at path the way bbolt
// chooses between them: the valid page with the higher txid.
func ReadMeta(path string) (Metas, error) {
	f, err := os.Open(path)
	if err != nil {
		return Metas{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Metas{}, err
	}
	ms := Metas{Used: -1, FileSize: fi.Size()}
	ms.Pages[0] = readMeta(f, 0, 0)
	ps := ms.Pages[0].pageSize
	if !ms.Pages[0].Valid {
		// Find page 1 as bbolt does: try each page size.
		ps = 0
		for size := int64(1024); size <= 1<<24 && size+pageHeader+metaSize <= fi.Size(); size <<= 1 {
			if p := readMeta(f, 1, size); p.Valid && int64(p.pageSize) == size {
				ps = p.pageSize
				break
			}
		}
	}
	if ps == 0 {
		ms.Pages[1] = MetaPage{Page: 1, Problem: "not found (no valid meta page gives the page size)"}
		return ms, nil
	}
	ms.PageSize = ps
	ms.Pages[1] = readMeta(f, 1, int64(ps))
	for i, p := range ms.Pages {
		if p.Valid && (ms.Used < 0 || p.Txid > ms.Pages[ms.Used].Txid) {
			ms.Used = i
		}
	}
	return ms, nil
}

// Problems lists what is wrong with the file as the meta pages tell it: a
// damaged meta page (bbolt silently opens with the other one, so if the
// damaged page held the newest commit, that commit is lost), or a file
// shorter than its used pages (truncated: bbolt would fault reading them).
func (m Metas) Problems() []string {
	var out []string
	if m.Used < 0 {
		return append(out, "neither meta page is valid: not a bbolt file, or both meta pages are damaged")
	}
	for _, p := range m.Pages {
		if !p.Valid {
			out = append(out, fmt.Sprintf("meta page %d is damaged (%s); bbolt opens at transaction %d from meta page %d, so a newer commit on page %d, if there was one, is lost",
				p.Page, p.Problem, m.Txid(), m.Used, p.Page))
		}
	}
	if need := int64(m.Pages[m.Used].HighWater) * int64(m.PageSize); m.FileSize < need {
		out = append(out, fmt.Sprintf("the file is truncated: %d bytes, its pages need %d", m.FileSize, need))
	}
	return out
}

// Truncated reports a file shorter than its used pages.
func (m Metas) Truncated() bool {
	return m.Used >= 0 && m.FileSize < int64(m.Pages[m.Used].HighWater)*int64(m.PageSize)
}

// MaxProblems bounds what Structure collects: a badly damaged file can
// report a problem per page.
const MaxProblems = 100

// Structure runs bbolt's consistency check (tx.Check: every page reachable
// once, freelist sane, keys ordered) in tx and returns its findings, at
// most MaxProblems of them. Run it only on a file whose meta pages passed
// (a truncated file faults in tx.Check's own goroutine, where Guard cannot
// catch it).
func Structure(tx *bolt.Tx) []string {
	var out []string
	for err := range tx.Check() {
		if len(out) < MaxProblems {
			out = append(out, err.Error())
		}
	}
	return out
}

// Open is bolt.Open under Guard: bbolt reads the meta and freelist pages
// while opening, and panics on some damage there too. (A build with the
// powerloss tag also records its commits: LosePower.)
func Open(path string, mode os.FileMode, opts *bolt.Options) (db *bolt.DB, err error) {
	err = Guard(func() error {
		var err error
		db, err = bolt.Open(path, mode, withCommitRecord(path, opts))
		return err
	})
	return db, err
}
