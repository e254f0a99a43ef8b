package poc

import (
	"io"
	"net"
	"sync"
	"time"
)

// link is a worker's network path to the authority: a TCP relay on
// 127.0.0.1 the driver can cut, so a disconnection is injected for real
// (TLS runs end to end through it; the worker pins the authority's
// certificate, not the relay's address).
type link struct {
	ln       net.Listener
	upstream string

	mu        sync.Mutex
	conns     map[net.Conn]bool
	downUntil time.Time
	wg        sync.WaitGroup
}

func newLink(upstream string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is where the worker dials.
func (l *link) Addr() string { return l.ln.Addr().String() }

func (l *link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		down := time.Now().Before(l.downUntil)
		l.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", l.upstream, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns[c], l.conns[up] = true, true
		l.mu.Unlock()
		l.wg.Add(2)
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

func (l *link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	l.mu.Lock()
	delete(l.conns, dst)
	delete(l.conns, src)
	l.mu.Unlock()
}

// Cut drops every open connection and refuses new ones for d.
func (l *link) Cut(d time.Duration) {
	l.mu.Lock()
	l.downUntil = time.Now().Add(d)
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Restore accepts connections again at once.
func (l *link) Restore() {
	l.mu.Lock()
	l.downUntil = time.Time{}
	l.mu.Unlock()
}

// Up reports whether the link accepts connections now.
func (l *link) Up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !time.Now().Before(l.downUntil)
}

func (l *link) Close() {
	l.ln.Close()
	l.Cut(time.Hour)
	l.wg.Wait()
}
