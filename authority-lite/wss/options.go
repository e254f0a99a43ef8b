package wss

import (
	"log/slog"
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
	// HelloTimeout closes a connection that has not completed HELLO in time
	// (default 10 s).
	HelloTimeout time.Duration
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
	defDur(&o.HelloTimeout, 10*time.Second)
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
