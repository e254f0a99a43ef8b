package runtime

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/clock"
)

// skewClock is the authority's view of a shared fake clock, optionally
// ahead of it: a worker whose clock lags stalls its renewals.
type skewClock struct {
	base *clock.Fake
	skew atomic.Int64
}

func (s *skewClock) Now() time.Time { return s.base.Now().Add(time.Duration(s.skew.Load())) }

// proxy forwards TCP between workers and the authority; tests cut it (a
// network partition) or freeze the authority-to-worker direction (a
// worker that hears nothing while its commands still go out).
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    []net.Conn
	down     bool
	frozen   chan struct{} // closed: not frozen
	wg       sync.WaitGroup
}

func newProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, frozen: make(chan struct{})}
	close(p.frozen)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(u, c); u.Close() }()
		go func() { defer p.wg.Done(); p.copyDown(c, u); c.Close() }()
	}
}

// copyDown copies authority → worker, waiting while frozen.
func (p *proxy) copyDown(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.frozen
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) url() string { return "wss://" + p.ln.Addr().String() + wss.Path }

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = make(chan struct{})
	p.mu.Unlock()
}

func (p *proxy) thaw() {
	p.mu.Lock()
	select {
	case <-p.frozen:
	default:
		close(p.frozen)
	}
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.thaw()
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
