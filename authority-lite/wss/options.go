package wss

import (
	"log/slog"
	"net/http"
	"time"
)

// Protocol constants of the binding.
const (
	// Path is where the server accepts WebSocket upgrades.
	Path = "/mwp"
	// Subprotocol is selected when a client offers it; it is optional.
	Subprotocol = "mwp-0.1"
	// ProtocolVersion is the only protocol version this server speaks.
	ProtocolVersion = "0.1"
)

// Options tune a Server. The zero value of every field takes its default.
type Options struct {
	// Routes, when set, serves every path under Path + "/" on the same
	// listener (the authority's HTTPS routes, authority-lite/httpapi).
	Routes http.Handler
	// MaxFrameBytes is the largest inbound message accepted (default 1 MiB).
	// A larger one is answered with PROTOCOL_VIOLATION and the connection is
	// closed (1009), since the rest of the message is never read.
	MaxFrameBytes int
	// SendBuffer is how many EVENT frames one Group may have queued for the
	// writer (default 256). When it is full the Group is paused and the
	// client gets BACKPRESSURE; it resumes once the queue is half empty.
	SendBuffer int
	// ReplayBatch is how many events one Backend.Events call asks for
	// (default 256).
	ReplayBatch int
	// HandshakeTimeout bounds the time from TCP accept to a completed HELLO:
	// TLS handshake, HTTP upgrade and HELLO together (default 10 s). Before
	// the upgrade the socket is closed; after it, close 1008. Serve measures
	// it from accept in real time; every connection also measures it from
	// the upgrade on the Backend clock (the one fake-clock tests move).
	HandshakeTimeout time.Duration
	// MaxConns bounds the connections Serve holds at once, from TCP accept
	// to close, whether they said HELLO or not (default 1024). Keep it below
	// the process's descriptor limit, less what the store, artifact files
	// and logs need. Over it, a connection is answered with HTTP 503,
	// Retry-After and a BACKPRESSURE error body before any upgrade.
	MaxConns int
	// MaxConnsPerIP bounds, per remote IP address, the connections not yet
	// authenticated: handshaking, or carrying requests to Routes (default
	// 64). A connection whose HELLO succeeded leaves its address's count
	// and stays in MaxConns, so a host that cannot authenticate holds at
	// most 64 sockets, while a fleet behind one NAT address is bounded by
	// MaxConns (500 agents behind 127.0.0.1 reconnect after an authority
	// restart with the defaults). Over it: 503, RATE_LIMITED.
	MaxConnsPerIP int
	// HelloBurst and HelloEvery bound the HELLO attempts per remote IP
	// address that fail, across its connections (default 10 at once, then
	// one per second): a HELLO is let in while its address has a token and
	// takes one only when it does not open the session (a bad proof, an
	// unknown agent, a replayed nonce, a bad frame). A HELLO that succeeds
	// costs its address nothing: only an enrolled agent's key can make
	// one, and a captured HELLO is refused by its nonce (and charged).
	// Over it: ERROR RATE_LIMITED with details.retryAfterMs; the
	// connection stays.
	HelloBurst int
	HelloEvery time.Duration
	// RouteBurst and RouteEvery bound requests to Routes per remote IP
	// address (default 60 at once, then ten per second); each costs a
	// signature check and a durable nonce write, as a HELLO does. Over it:
	// HTTP 429, RATE_LIMITED with details.retryAfterMs.
	RouteBurst int
	RouteEvery time.Duration
	// PingBurst and PingEvery bound the PINGs a client sends on one
	// connection (default 10 at once, then one per second; a client needs
	// one per PingInterval). Over it: ERROR RATE_LIMITED, no echo.
	PingBurst int
	PingEvery time.Duration
	// IdleTimeout closes a connection from which nothing has been received
	// for that long (default 90 s).
	IdleTimeout time.Duration
	// PingInterval is how long the client may be silent before the server
	// sends a PING of its own (default 30 s).
	PingInterval time.Duration
	// Tick is how often (real time) the liveness rules are checked against
	// Backend.Now (default 1 s). Tests with a fake clock make it short.
	Tick time.Duration
	// WriteTimeout bounds one frame write; a client that does not read for
	// that long is disconnected (default 10 s).
	WriteTimeout time.Duration
	// RetryAfter is the retryAfterMs guidance of BACKPRESSURE frames
	// (default 200 ms).
	RetryAfter time.Duration
	// OnBackpressure, when set, is called each time a Group's stream to a
	// connection pauses because that connection's queue is full (the
	// operator's per-Group backpressure metric). It must not block.
	OnBackpressure func(groupID string)
	// MaxGroups bounds the Groups one connection may stream at once
	// (default 1024); more are refused with RATE_LIMITED.
	MaxGroups int
	// MaxPendingCommands bounds the COMMANDs of one connection that are
	// queued or running (default 256); more are answered with a retryable
	// BACKPRESSURE error.
	MaxPendingCommands int
	// OriginPatterns are extra browser origins allowed to connect (see
	// websocket.AcceptOptions); clients that send no Origin are always
	// allowed.
	OriginPatterns []string
	// Logger receives connection-level diagnostics (default: discarded).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFrameBytes, 1<<20)
	def(&o.SendBuffer, 256)
	def(&o.ReplayBatch, 256)
	def(&o.MaxGroups, 1024)
	def(&o.MaxPendingCommands, 256)
	def(&o.MaxConns, 1024)
	def(&o.MaxConnsPerIP, 64)
	def(&o.HelloBurst, 10)
	def(&o.PingBurst, 10)
	defDur(&o.HelloEvery, time.Second)
	def(&o.RouteBurst, 60)
	defDur(&o.RouteEvery, 100*time.Millisecond)
	defDur(&o.PingEvery, time.Second)
	defDur(&o.HandshakeTimeout, 10*time.Second)
	defDur(&o.IdleTimeout, 90*time.Second)
	defDur(&o.PingInterval, 30*time.Second)
	defDur(&o.Tick, time.Second)
	defDur(&o.WriteTimeout, 10*time.Second)
	defDur(&o.RetryAfter, 200*time.Millisecond)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
