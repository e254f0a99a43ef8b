//go:build powerloss

package storecheck

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// armed is set by SIGUSR1: the next commit to return kills the process
// first, after its meta page's fdatasync and before the record or any
// caller sees it, the instant whose loss LosePower decides. A test sends
// it to cut the power inside a commit rather than between two.
var armed atomic.Bool

func init() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			armed.Store(true)
		}
	}()
}

// withCommitRecord, in a build with the powerloss tag, records the commits
// of a bbolt file opened for writing in PATH.committed. bbolt logs
// "Committing transaction N successfully" when Commit returns, after the
// meta page's fdatasync and before Update returns to its caller, so before
// anything the commit holds can have been acknowledged. That line comes
// after Commit has released the writer lock, though, and the next
// transaction may already be writing over pages the older meta page still
// names; so "Committing transaction N", which the next writer logs while it
// holds the lock and before it writes a page, records N-1 as well.
func withCommitRecord(path string, opts *bolt.Options) *bolt.Options {
	if opts != nil && (opts.ReadOnly || opts.NoSync || opts.Logger != nil) {
		return opts // nothing written, nothing durable, or logged already
	}
	f, err := os.OpenFile(path+CommittedSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return opts
	}
	o := bolt.Options{}
	if opts != nil {
		o = *opts
	}
	o.Logger = &commitRecorder{f: f}
	return &o
}

type commitRecorder struct {
	mu     sync.Mutex
	f      *os.File
	synced uint64 // the newest transaction known to be on disk
}

func (r *commitRecorder) Debugf(format string, v ...any) {
	if len(v) != 1 {
		return
	}
	var txid uint64
	if _, err := fmt.Sscan(fmt.Sprint(v[0]), &txid); err != nil {
		return
	}
	switch format {
	case "Committing transaction %d":
		txid-- // this writer holds the lock: the one before it returned
	case "Committing transaction %d successfully":
		if armed.Load() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the kill is on its way
		}
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if txid <= r.synced {
		return // a late line must not move the record back
	}
	r.synced = txid
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], txid)
	_, _ = r.f.WriteAt(b[:], 0)
}

func (*commitRecorder) Debug(...any)            {}
func (*commitRecorder) Error(...any)            {}
func (*commitRecorder) Errorf(string, ...any)   {}
func (*commitRecorder) Info(...any)             {}
func (*commitRecorder) Infof(string, ...any)    {}
func (*commitRecorder) Warning(...any)          {}
func (*commitRecorder) Warningf(string, ...any) {}
func (*commitRecorder) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (*commitRecorder) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (*commitRecorder) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (*commitRecorder) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
