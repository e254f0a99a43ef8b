package wss

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/missionweave/mwp-worker/protocol"
)

// controlCap bounds the replies queued for one connection; producers wait
// (and so stop reading from the client) while it is full.
const controlCap = 256

// conn is the I/O around one session: the reader (the goroutine that runs
// serve) feeds the session and applies its output; one writer goroutine
// owns every write; one delivery goroutine feeds every subscribed Group's
// lane (stream.go) and one goroutine per busy command lane answers
// commands, both into the outbox; a ticker applies liveness. Goroutines
// per connection do not grow with the Groups it streams.
type conn struct {
	b     Backend
	opts  Options
	hooks *hooks
	log   *slog.Logger
	ws    *websocket.Conn
	ids   *frameIDs
	sess  *session
	out   *outbox
	live  *liveness
	cmds  *commandLanes
	slot  *limitedConn // the accepted connection's slot; nil outside Serve

	dlv *delivery
	wg  sync.WaitGroup // the delivery loop, its waits and command lanes

	// lastFrame is when the reader last finished handling a frame (Unix
	// nanoseconds, real time); inFrame is 1 while it handles one. A
	// replaced session's final ERROR waits for the reader to go quiet.
	lastFrame atomic.Int64
	inFrame   atomic.Int32

	closeMu sync.Mutex
	closing bool           // a close handshake was started
	ended   bool           // serve is finishing: no new handshakes
	closers sync.WaitGroup // the handshake goroutine
}

// hooks let tests observe internal moments without sleeping.
type hooks struct {
	paused func(groupID string) // a Group's stream paused on a full lane
}

// newConn wraps an accepted connection; start is the Backend time at which
// the upgrade request arrived, when the Backend-clock HELLO deadline starts
// (the slot's real-time one started at TCP accept). ip is the remote
// address whose HELLO bucket the session draws from.
func newConn(s *Server, ws *websocket.Conn, start time.Time, ip string, slot *limitedConn) *conn {
	ids := newFrameIDs()
	c := &conn{
		b: s.b, opts: s.opts, hooks: &s.hooks, log: s.log, ws: ws, ids: ids,
		out:  newOutbox(s.opts.SendBuffer, controlCap),
		live: newLiveness(start, s.opts),
		dlv:  newDelivery(),
		slot: slot,
	}
	c.sess = newSession(s.b, ids, s.opts.MaxFrameBytes, s.log)
	c.sess.limits = sessionLimits{
		helloReady:  func(now time.Time) (time.Duration, bool) { return s.hellos.ready(ip, now) },
		helloFailed: func(now time.Time) { s.hellos.charge(ip, now) },
		pings:       rate.NewLimiter(rate.Every(s.opts.PingEvery), s.opts.PingBurst),
		every:       s.opts.PingEvery,
	}
	return c
}

// serve runs the connection until the client leaves, a fatal protocol
// error or ctx ends. It returns after every goroutine it started.
func (c *conn) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	c.cmds = newCommandLanes(c.opts.MaxPendingCommands, &c.wg,
		func(s submission) func() (*protocol.Receipt, error) { return c.begin(ctx, s) },
		func(s submission, rc *protocol.Receipt, err error) { c.answer(ctx, s, rc, err) })
	// Our own limit, not the library's: the library would close the
	// connection before we could answer PROTOCOL_VIOLATION.
	c.ws.SetReadLimit(-1)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop(ctx)
	}()
	var tickers sync.WaitGroup
	tickers.Go(func() { c.livenessLoop(ctx) })
	c.wg.Go(func() { c.deliver(ctx) })

	if code := c.readLoop(ctx, writerDone); code != 0 {
		_ = c.ws.Close(code, "frame too large")
	}
	cancel()
	c.out.close()
	tickers.Wait()
	c.wg.Wait()
	<-writerDone
	c.closeMu.Lock()
	c.ended = true
	c.closeMu.Unlock()
	c.closers.Wait()
	_ = c.ws.CloseNow()
}

// readLoop reads messages until the connection fails. It returns a close
// status when the session asked to close after its last reply.
func (c *conn) readLoop(ctx context.Context, writerDone <-chan struct{}) websocket.StatusCode {
	var buf bytes.Buffer
	for {
		typ, r, err := c.ws.Reader(ctx)
		if err != nil {
			c.log.Debug("wss: connection ended", "peer", c.sess.peer, "err", err)
			return 0
		}
		buf.Reset()
		if buf.Cap() > 1<<16 {
			buf = bytes.Buffer{} // do not keep one large frame's buffer forever
		}
		c.inFrame.Store(1)
		n, err := buf.ReadFrom(io.LimitReader(r, int64(c.opts.MaxFrameBytes)+1))
		if err != nil {
			return 0
		}
		c.live.seen(c.b.Now())
		out := c.sess.handle(ctx, inbound{
			binary:   typ == websocket.MessageBinary,
			oversize: n > int64(c.opts.MaxFrameBytes),
			data:     buf.Bytes(),
		})
		if out.close {
			// The rest of the message stays unread: answer, then close.
			last := out.send[len(out.send)-1]
			for _, f := range out.send[:len(out.send)-1] {
				c.out.pushControl(ctx, f)
			}
			c.out.finish(last)
			select {
			case <-writerDone:
			case <-time.After(c.opts.WriteTimeout):
			}
			return websocket.StatusMessageTooBig
		}
		if out.opened {
			c.live.opened() // before the reply: the client may act on it at once
			if c.slot != nil {
				c.slot.authenticated()
			}
			c.wg.Go(func() { c.watchSession(ctx, writerDone) })
			if mg, ok := c.b.(MemberGroups); ok {
				c.wg.Go(func() { c.watchGroups(ctx, mg) })
			}
		}
		for _, f := range out.send {
			if c.sess.replaced() {
				// The writer stops after the final ERROR: never wait for it.
				c.out.offerControl(f)
				continue
			}
			if !c.out.pushControl(ctx, f) {
				return 0
			}
		}
		c.lastFrame.Store(time.Now().UnixNano())
		c.inFrame.Store(0)
		for _, sub := range out.subscribe {
			c.startStream(ctx, sub)
		}
		if s := out.submit; s != nil && !c.cmds.add(*s) {
			if !c.out.pushControl(ctx, encodeError(c.ids.next(), busy(*s))) {
				return 0
			}
		}
	}
}

// watchSession ends the connection once its session is replaced (a newer
// session_open of the agent): no EVENT frame is queued any more, every new
// frame is refused, the answers of commands already running go out (the
// connection that opened the new session gets its receipt), then a final
// ERROR AUTH_STALE_SESSION without inReplyTo and close 1008.
//
// The reader starts it after a successful HELLO, so the session's peer,
// epoch and ended channel no longer change.
func (c *conn) watchSession(ctx context.Context, writerDone <-chan struct{}) {
	select {
	case <-c.sess.ended:
	case <-ctx.Done():
		return
	}
	c.out.stopEvents()
	c.log.Debug("wss: session replaced", "peer", c.sess.peer, "sessionEpoch", c.sess.epoch)
	bound := time.NewTimer(c.opts.WriteTimeout)
	defer bound.Stop()
	select {
	case <-c.cmds.idle():
	case <-bound.C:
	case <-ctx.Done():
		return
	}
	// Frames the client sent right behind session_open are still arriving:
	// each is answered AUTH_STALE_SESSION before the final ERROR, once the
	// reader has handled none for replacedQuiet (bounded as above).
	for !c.readerQuiet(time.Now()) {
		select {
		case <-time.After(replacedQuiet / 4):
		case <-bound.C:
			c.finishReplaced(ctx, writerDone, bound)
			return
		case <-ctx.Done():
			return
		}
	}
	c.finishReplaced(ctx, writerDone, bound)
}

// replacedQuiet is how long a replaced session's reader must have handled
// no frame before the final ERROR goes: a client's frames sent back to
// back arrive well within it.
const replacedQuiet = 50 * time.Millisecond

// readerQuiet reports whether the reader is between frames and has been
// for replacedQuiet.
func (c *conn) readerQuiet(now time.Time) bool {
	return c.inFrame.Load() == 0 && now.Sub(time.Unix(0, c.lastFrame.Load())) >= replacedQuiet
}

// finishReplaced sends the final ERROR of a replaced session and closes
// 1008 once it is written (bounded).
func (c *conn) finishReplaced(ctx context.Context, writerDone <-chan struct{}, bound *time.Timer) {
	c.out.finish(encodeError(c.ids.next(), WireError(c.sess.staleSession(), "", "")))
	select {
	case <-writerDone:
	case <-bound.C:
	case <-ctx.Done():
		return
	}
	c.closeWith(websocket.StatusPolicyViolation, "session replaced")
}

// watchGroups sends a GROUPS frame each time the agent's Groups differ
// from those it was last told (ours, docs/wire.md), until the connection
// or its session ends. Started after HELLO, like watchSession.
func (c *conn) watchGroups(ctx context.Context, mg MemberGroups) {
	last, changed := c.sess.groups, c.sess.groupsChanged
	for {
		select {
		case <-changed:
		case <-c.sess.ended:
			return
		case <-ctx.Done():
			return
		}
		changed = mg.MembershipChanged()
		now := mg.MemberGroups(c.sess.peer)
		if slices.Equal(now, last) {
			continue
		}
		last = now
		f, err := encodeGroups(c.ids.next(), now)
		if err != nil {
			c.log.Error("wss: groups notice", "peer", c.sess.peer, "err", err)
			continue
		}
		if !c.out.pushControl(ctx, f) {
			return
		}
	}
}

// startStream starts or restarts one Group's stream from sub.after.
func (c *conn) startStream(ctx context.Context, sub subscription) {
	if !c.out.streams(sub.groupID) && c.out.streamCount() >= c.opts.MaxGroups {
		e := protocol.Errorf(protocol.CodeRateLimited, "this connection already streams %d groups", c.opts.MaxGroups)
		c.out.pushControl(ctx, encodeError(c.ids.next(), withDetail(WireError(e, sub.frameID, ""), "groupId", sub.groupID)))
		return
	}
	c.dlv.start(sub, c.out.reset(sub.groupID))
}

// writeLoop is the only writer of the connection.
func (c *conn) writeLoop(ctx context.Context) {
	for {
		frame, last, ok := c.out.pop()
		if !ok {
			select {
			case <-c.out.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		wctx, cancel := context.WithTimeout(ctx, c.opts.WriteTimeout)
		err := c.ws.Write(wctx, websocket.MessageText, frame)
		cancel()
		if err != nil || last {
			if err != nil {
				c.log.Debug("wss: write failed", "err", err)
				_ = c.ws.CloseNow() // wakes the reader
			}
			return
		}
	}
}

// livenessLoop checks the liveness rules every Tick against Backend.Now.
func (c *conn) livenessLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch c.live.tick(c.b.Now()) {
		case sendPing:
			if p, err := encodePing(c.ids.next(), newNonce(), false); err == nil {
				c.out.pushControl(ctx, p)
			}
		case expireNoHello:
			c.closeWith(websocket.StatusPolicyViolation, "no HELLO in time")
			return
		case expireIdle:
			c.closeWith(websocket.StatusPolicyViolation, "idle timeout")
			return
		}
	}
}

// closeWith starts the close handshake; the reader then sees the end.
func (c *conn) closeWith(code websocket.StatusCode, reason string) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closing || c.ended {
		return
	}
	c.closing = true
	c.log.Debug("wss: closing", "code", code, "reason", reason)
	c.closers.Go(func() { _ = c.ws.Close(code, reason) })
}
