package wss

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Server serves the WebSocket binding (spec 17) for one Backend.
type Server struct {
	b     Backend
	opts  Options
	log   *slog.Logger
	hooks hooks

	ctx    context.Context // ends every connection when the server closes
	cancel context.CancelFunc
	// routesCtx ends every Routes request at the start of Close: a
	// long-poll must not hold a shutdown.
	routesCtx    context.Context
	routesCancel context.CancelFunc

	hellos *keyedLimiter  // failed HELLO attempts per remote IP
	routes *keyedLimiter  // Routes requests per remote IP
	ln     *limitListener // set by Serve, under mu

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	active sync.WaitGroup
}

// NewServer returns a server for b; opts zero values take their defaults.
func NewServer(b Backend, opts Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	opts = opts.withDefaults()
	rctx, rcancel := context.WithCancel(context.Background())
	return &Server{b: b, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel, routesCtx: rctx, routesCancel: rcancel, conns: map[*conn]struct{}{},
		hellos: newKeyedLimiter(opts.HelloEvery, opts.HelloBurst), routes: newKeyedLimiter(opts.RouteEvery, opts.RouteBurst)}
}

// Handler returns a handler serving the binding at Path.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, s)
	if s.opts.Routes != nil {
		mux.HandleFunc(Path+"/", s.route)
	}
	return mux
}

// admit lets one request in while the server is open and its connection
// is within the caps, counting it in active (the caller calls Done); else
// it answers the request itself. slot is the connection's, nil when the
// server was not started by Serve.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (slot *limitedConn, ok bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return nil, false
	}
	s.active.Add(1)
	s.mu.Unlock()
	slot, _ = r.Context().Value(slotKey{}).(*limitedConn)
	if slot != nil && slot.refused != "" {
		s.refuse(w, slot.refused)
		s.active.Done()
		return nil, false
	}
	return slot, true
}

// ServeHTTP upgrades one request and runs the connection until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	slot, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.active.Done()
	start := s.b.Now() // before the client can see the upgrade succeed
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   []string{Subprotocol},
		OriginPatterns: s.opts.OriginPatterns,
	})
	if err != nil {
		s.log.Debug("wss: upgrade refused", "remote", r.RemoteAddr, "err", err)
		return // Accept has written the HTTP error
	}
	c := newConn(s, ws, start, remoteIPOf(r.RemoteAddr), slot)
	if slot != nil {
		slot.upgraded(func() { c.closeWith(websocket.StatusPolicyViolation, "no HELLO in time") })
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.serve(s.ctx)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// route serves one request of Options.Routes. The connection caps hold it
// like any connection; the HELLO deadline does not (an HTTP request is not
// a handshake; the request has its own bounds), and the connection is not
// kept alive, so a slot is held for one request.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	slot, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.active.Done()
	if slot != nil {
		slot.hello()
	}
	w.Header().Set("Connection", "close")
	if wait, ok := s.routes.allow(remoteIPOf(r.RemoteAddr), s.b.Now()); !ok {
		e := rateLimited(wait, "too many requests from this address; retry after %v", wait)
		e.Details["limit"] = "routeRequests"
		body, _ := json.Marshal(e)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.routesCtx, cancel)()
	s.opts.Routes.ServeHTTP(w, r.WithContext(ctx))
}

// connCounts reports the connections Serve holds: admitted ones, those
// accepted only to be answered 503, and the admitted ones in session.
func (s *Server) connCounts() (total, refusing, sessions int) {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return 0, 0, 0
	}
	return ln.counts()
}

// Connections reports the connections Serve holds now: admitted ones
// (handshaking or in session), those accepted only to be answered 503, and
// of the admitted ones those whose HELLO completed, for the operator's
// metrics.
func (s *Server) Connections() (admitted, refusing, sessions int) { return s.connCounts() }

// remoteIPOf is the IP address of an http.Request's RemoteAddr.
func remoteIPOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// Close refuses new connections, closes every open one with 1001 (going
// away) and waits for them to end. It is safe to call more than once.
func (s *Server) Close() error {
	s.routesCancel()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.closeWith(websocket.StatusGoingAway, "server shutting down")
	}
	s.mu.Unlock()
	// The close handshakes take at most a few seconds each; after that the
	// context ends whatever is left.
	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cancel()
		<-done
	}
	s.cancel()
	return nil
}

// Serve accepts connections on ln (see Listen) until ctx ends, then shuts
// down: no new connections, open ones closed with 1001. It returns nil
// after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// The caps count TCP connections, so they sit below TLS: a connection
	// in its TLS handshake already holds a descriptor.
	var tlsConfig *tls.Config
	if tl, ok := ln.(*tlsListener); ok {
		ln, tlsConfig = tl.Listener, tl.config
	}
	limited := s.limit(ln)
	s.mu.Lock()
	s.ln = limited
	s.mu.Unlock()
	ln = limited
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.opts.HandshakeTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc := slotOf(c); lc != nil {
				return context.WithValue(ctx, slotKey{}, lc)
			}
			return ctx
		},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err := hs.Serve(ln)
	cancel()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return s.Close()
	}
	return err
}
