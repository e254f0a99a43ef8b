package queue

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt locks the file with flock: the worker holds LOCK_EX for its whole
// life, so a read-only opener (LOCK_SH) would wait until the worker exits.
// Instead, while the store is open for writing it serves consistent copies
// of itself on a Unix socket in the data directory: one read transaction per
// connection, written with tx.WriteTo, preceded by a small header carrying
// the live reorder-buffer status that is never on disk.

const snapMagic = "MWPSNAP1"

// serveTimeout bounds one copy: a stalled reader must not hold a read
// transaction (which blocks bbolt from growing its mmap) for long.
const serveTimeout = 30 * time.Second

type liveStatus struct {
	PID     int            `json:"pid"`
	Buffers []BufferStatus `json:"buffers,omitempty"`
	// Process is what the process using the store reports of itself
	// (Options.LiveStatus: a worker's connection, session, slots, runs).
	Process json.RawMessage `json:"process,omitempty"`
}

// A reader asks for the status alone by sending statusOnly first; a reader
// that sends nothing within requestWait gets the status and a copy.
const (
	statusOnly    = 'S'
	statusAndCopy = 'C'
	requestWait   = 200 * time.Millisecond
)

func (s *Store) serve() error {
	path := filepath.Join(s.dir, SocketName)
	// The file lock is ours, so any socket left here belongs to a worker
	// that is gone.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("queue: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("queue: inspect socket (data directory paths must stay under ~100 bytes): %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
	}
	s.ln, s.sockPath = ln, path
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer conn.Close()
				var req [1]byte
				conn.SetReadDeadline(time.Now().Add(requestWait))
				n, _ := conn.Read(req[:])
				conn.SetDeadline(time.Now().Add(serveTimeout))
				if n == 1 && req[0] == statusOnly {
					s.writeStatus(conn)
					return
				}
				s.writeCopy(conn)
			}()
		}
	}()
	return nil
}

func (s *Store) status() ([]byte, error) {
	st := liveStatus{PID: os.Getpid(), Buffers: s.Buffers()}
	if s.opts.LiveStatus != nil {
		raw, err := json.Marshal(s.opts.LiveStatus())
		if err != nil {
			return nil, err
		}
		st.Process = raw
	}
	return json.Marshal(st)
}

// writeStatus writes the header with the status and no copy (size 0).
func (s *Store) writeStatus(w io.Writer) error {
	status, err := s.status()
	if err != nil {
		return err
	}
	hdr := make([]byte, 0, len(snapMagic)+12+len(status))
	hdr = append(hdr, snapMagic...)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(status)))
	hdr = append(hdr, status...)
	hdr = binary.BigEndian.AppendUint64(hdr, 0)
	_, err = w.Write(hdr)
	return err
}

// writeCopy writes the header and a consistent copy of the file to w.
func (s *Store) writeCopy(w io.Writer) error {
	status, err := s.status()
	if err != nil {
		return err
	}
	return s.view(func(tx *bolt.Tx) error {
		hdr := make([]byte, 0, len(snapMagic)+12+len(status))
		hdr = append(hdr, snapMagic...)
		hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(status)))
		hdr = append(hdr, status...)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(tx.Size()))
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		_, err := tx.WriteTo(w)
		return err
	})
}

// fetchCopy asks the worker serving dir for a copy of its store, writes it
// to a temporary file and returns that file's path and the live status.
func fetchCopy(dir string, timeout time.Duration) (string, *liveStatus, error) {
	conn, err := net.DialTimeout("unix", filepath.Join(dir, SocketName), timeout)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(serveTimeout))
	if _, err := conn.Write([]byte{statusAndCopy}); err != nil {
		return "", nil, err
	}
	live, size, err := readLiveStatus(conn)
	if err != nil {
		return "", nil, err
	}
	f, err := os.CreateTemp("", "mwp-inspect-*.db")
	if err != nil {
		return "", nil, err
	}
	got, err := io.Copy(f, io.LimitReader(conn, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && got != size {
		err = fmt.Errorf("copy ended after %d of %d bytes", got, size)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), live, nil
}

// holderPID asks the worker serving dir for its process id.
func holderPID(dir string) (int, bool) {
	live, err := askStatus(dir, time.Second)
	if err != nil || live.PID <= 0 {
		return 0, false
	}
	return live.PID, true
}

// Live is what a running worker reports of itself through its socket.
type Live struct {
	PID     int             `json:"pid"`
	Buffers []BufferStatus  `json:"buffers"`
	Process json.RawMessage `json:"process,omitempty"`
}

// LiveStatus asks the process running on dir's store for its status,
// without a copy of the store. It fails when none is running.
func LiveStatus(dir string, timeout time.Duration) (Live, error) {
	live, err := askStatus(dir, timeout)
	if err != nil {
		return Live{}, fmt.Errorf("queue: no running worker answers on %s: %w", filepath.Join(dir, SocketName), err)
	}
	out := Live{PID: live.PID, Buffers: live.Buffers, Process: live.Process}
	if out.Buffers == nil {
		out.Buffers = []BufferStatus{}
	}
	return out, nil
}

func askStatus(dir string, timeout time.Duration) (*liveStatus, error) {
	conn, err := net.DialTimeout("unix", filepath.Join(dir, SocketName), timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout + 2*time.Second))
	if _, err := conn.Write([]byte{statusOnly}); err != nil {
		return nil, err
	}
	live, _, err := readLiveStatus(conn)
	return live, err
}

// readLiveStatus reads the header of a served copy: the live status and
// the size of the file that follows.
func readLiveStatus(conn net.Conn) (*liveStatus, int64, error) {
	var head [len(snapMagic) + 4]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return nil, 0, fmt.Errorf("read header: %w", err)
	}
	if string(head[:len(snapMagic)]) != snapMagic {
		return nil, 0, fmt.Errorf("socket %s does not serve a worker store", conn.RemoteAddr())
	}
	n := binary.BigEndian.Uint32(head[len(snapMagic):])
	if n > 64<<20 {
		return nil, 0, fmt.Errorf("live status of %d bytes is implausible", n)
	}
	status := make([]byte, n+8)
	if _, err := io.ReadFull(conn, status); err != nil {
		return nil, 0, fmt.Errorf("read status: %w", err)
	}
	var live liveStatus
	if err := json.Unmarshal(status[:n], &live); err != nil {
		return nil, 0, fmt.Errorf("live status: %w", err)
	}
	return &live, int64(binary.BigEndian.Uint64(status[n:])), nil
}
