package storecheck

import (
	"encoding/binary"
	"fmt"
	"os"
)

// bbolt page layout (go.etcd.io/bbolt internal/common/page.go): a 16-byte
// header (id, flags, count, overflow), then count 16-byte elements whose
// pos field is relative to the element itself. Branch elements are (pos,
// ksize, pgid), leaf elements (flags, pos, ksize, vsize); a leaf element
// with flag 1 is a bucket: its value starts with (root pgid, sequence) and,
// for root 0, holds the bucket's single page inline.
const (
	branchFlag     = 0x01
	leafFlag       = 0x02
	freelistFlag   = 0x10
	bucketLeafFlag = 0x01
	elemSize       = 16
)

// Pages walks every page reachable from the meta page bbolt opens with,
// reading the file (never the memory map) and checking every offset and
// length before following it: page ids below the high-water mark, a page
// that says it is the page it was reached as, elements and their keys and
// values inside their page, no page reached twice. It returns at most
// MaxProblems findings. bbolt follows the same offsets without checking
// them, and a bad one faults where no recover can help (tx.Check reads in
// a goroutine of its own), so Structure is run only when Pages is clean.
func Pages(path string, ms Metas) []string {
	if ms.Used < 0 {
		return []string{"no valid meta page"}
	}
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	m := ms.Pages[ms.Used]
	w := &walker{f: f, ps: uint64(ms.PageSize), hw: m.HighWater, size: uint64(ms.FileSize), far: map[uint64]bool{}}
	if w.ps > 0 {
		w.seen = make([]bool, min(w.hw, w.size/w.ps))
	}
	w.bucket(m.root, nil, "root")
	if m.freelist != ^uint64(0) {
		w.freelistPage(m.freelist)
	}
	return w.problems
}

type walker struct {
	f        *os.File
	ps, hw   uint64
	size     uint64
	seen     []bool          // by page id, for the pages in the file
	far      map[uint64]bool // seen ids past the file's end (a damaged file)
	spare    [][]byte        // page buffers no longer in use
	problems []string
	// ahead holds the pages read ahead of a walk that reads in file order,
	// as it mostly does (bbolt appends pages): one pread a page was most of
	// the walk's cost. It starts at page aheadID; next is the page after the
	// last read.
	ahead         []byte
	aheadID, next uint64
}

// readAhead is how many pages a read in file order brings in at once.
const readAhead = 32

// read fills buf from page id on, as f.ReadAt does: from the pages read
// ahead when it lies in them, else from the file, reading ahead when the
// walk goes on in file order.
func (w *walker) read(buf []byte, id uint64) error {
	n := uint64(len(buf)) / w.ps
	defer func() { w.next = id + n }()
	if id >= w.aheadID && (id+n)*w.ps <= w.aheadID*w.ps+uint64(len(w.ahead)) {
		copy(buf, w.ahead[(id-w.aheadID)*w.ps:])
		return nil
	}
	if end := min((id+readAhead)*w.ps, w.size); id == w.next && (id+n)*w.ps <= end {
		if w.ahead == nil {
			w.ahead = make([]byte, readAhead*w.ps)
		}
		w.ahead = w.ahead[:end-id*w.ps]
		if _, err := w.f.ReadAt(w.ahead, int64(id*w.ps)); err == nil {
			w.aheadID = id
			copy(buf, w.ahead)
			return nil
		}
		w.ahead = w.ahead[:0]
	}
	_, err := w.f.ReadAt(buf, int64(id*w.ps))
	return err
}

// mark notes page id as reached and reports whether it had been.
func (w *walker) mark(id uint64) bool {
	if id < uint64(len(w.seen)) {
		was := w.seen[id]
		w.seen[id] = true
		return was
	}
	was := w.far[id]
	w.far[id] = true
	return was
}

// release hands back a buffer page returned once its node is checked.
func (w *walker) release(buf []byte) {
	w.spare = append(w.spare, buf[:0])
}

func (w *walker) fail(format string, args ...any) {
	if len(w.problems) < MaxProblems {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// page reads page id and its overflow pages, or reports why not.
func (w *walker) page(id uint64, where string) []byte {
	if id < 2 || id >= w.hw {
		w.fail("%s: page %d is outside the used pages 2..%d", where, id, w.hw-1)
		return nil
	}
	if w.mark(id) {
		w.fail("%s: page %d is reached twice", where, id)
		return nil
	}
	var buf []byte
	if n := len(w.spare); n > 0 {
		buf, w.spare = w.spare[n-1], w.spare[:n-1]
	}
	buf = append(buf, make([]byte, w.ps)...)
	if (id+1)*w.ps > w.size {
		w.fail("%s: page %d lies past the end of the file", where, id)
		return nil
	}
	if err := w.read(buf, id); err != nil {
		w.fail("%s: page %d unreadable: %v", where, id, err)
		return nil
	}
	le := binary.LittleEndian
	if got := le.Uint64(buf[0:]); got != id {
		w.fail("%s: page %d identifies as page %d", where, id, got)
		return nil
	}
	over := uint64(le.Uint32(buf[12:]))
	if id+over >= w.hw || (id+over+1)*w.ps > w.size {
		w.fail("%s: page %d with %d overflow pages runs past the used pages", where, id, over)
		return nil
	}
	if over > 0 {
		buf = append(buf, make([]byte, over*w.ps)...)
		if err := w.read(buf[w.ps:], id+1); err != nil {
			w.fail("%s: page %d unreadable: %v", where, id, err)
			return nil
		}
	}
	for i := uint64(1); i <= over; i++ {
		w.mark(id + i)
	}
	return buf
}

// bucket walks a bucket's tree from root, or its inline page.
func (w *walker) bucket(root uint64, inline []byte, where string) {
	if root == 0 {
		w.node(inline, where+" (inline)")
		return
	}
	if buf := w.page(root, where); buf != nil {
		w.node(buf, fmt.Sprintf("%s page %d", where, root))
		w.release(buf)
	}
}

// node checks one branch or leaf page held in buf and follows it.
func (w *walker) node(buf []byte, where string) {
	le := binary.LittleEndian
	if len(buf) < 16 {
		w.fail("%s: %d bytes, shorter than a page header", where, len(buf))
		return
	}
	flags, count := le.Uint16(buf[8:]), uint64(le.Uint16(buf[10:]))
	if 16+count*elemSize > uint64(len(buf)) {
		w.fail("%s: %d elements do not fit in %d bytes", where, count, len(buf))
		return
	}
	in := func(off, n uint64) bool { return off <= uint64(len(buf)) && n <= uint64(len(buf))-off }
	switch flags {
	case branchFlag:
		for i := uint64(0); i < count; i++ {
			e := 16 + i*elemSize
			pos, ksize, child := uint64(le.Uint32(buf[e:])), uint64(le.Uint32(buf[e+4:])), le.Uint64(buf[e+8:])
			if !in(e+pos, ksize) {
				w.fail("%s: branch element %d points outside its page", where, i)
				return
			}
			if cb := w.page(child, where); cb != nil {
				w.node(cb, fmt.Sprintf("%s > page %d", where, child))
				w.release(cb)
			}
		}
	case leafFlag:
		for i := uint64(0); i < count; i++ {
			e := 16 + i*elemSize
			ef, pos := le.Uint32(buf[e:]), uint64(le.Uint32(buf[e+4:]))
			ksize, vsize := uint64(le.Uint32(buf[e+8:])), uint64(le.Uint32(buf[e+12:]))
			if !in(e+pos, ksize) || !in(e+pos+ksize, vsize) {
				w.fail("%s: leaf element %d points outside its page", where, i)
				return
			}
			if ef&bucketLeafFlag == 0 {
				continue
			}
			v := buf[e+pos+ksize : e+pos+ksize+vsize]
			if len(v) < 16 {
				w.fail("%s: bucket element %d holds %d bytes, less than a bucket header", where, i, len(v))
				continue
			}
			name := fmt.Sprintf("%s/%q", where, buf[e+pos:e+pos+ksize])
			w.bucket(le.Uint64(v), v[16:], name)
		}
	default:
		w.fail("%s: page type %#x is neither branch nor leaf", where, flags)
	}
}

func (w *walker) freelistPage(id uint64) {
	buf := w.page(id, "freelist")
	if buf == nil {
		return
	}
	le := binary.LittleEndian
	if f := le.Uint16(buf[8:]); f != freelistFlag {
		w.fail("freelist: page %d has type %#x", id, f)
		return
	}
	count, start := uint64(le.Uint16(buf[10:])), uint64(16)
	if count == 0xFFFF { // the real count is the first element
		if len(buf) < 24 {
			w.fail("freelist: page %d too short", id)
			return
		}
		count, start = le.Uint64(buf[16:]), 24
	}
	if count > (uint64(len(buf))-start)/8 {
		w.fail("freelist: page %d lists %d ids, more than it holds", id, count)
		return
	}
	for i := uint64(0); i < count; i++ {
		if p := le.Uint64(buf[start+i*8:]); p < 2 || p >= w.hw {
			w.fail("freelist: page %d lists page %d, outside the used pages", id, p)
			return
		}
	}
}
