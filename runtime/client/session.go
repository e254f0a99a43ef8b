package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// errPingTimeout ends a connection whose PING went unanswered.
var errPingTimeout = errors.New("client: authority did not answer PING in time")

// readItem is what the reader goroutine hands the session loop: a decoded
// frame, a frame that failed to decode (bad: logged, skipped) or the end of
// the connection (err).
type readItem struct {
	f   inbound
	bad error
	err error
}

func (it readItem) isEvent() bool {
	return it.err == nil && it.bad == nil && it.f.typ == protocol.FrameEvent
}

type snapResult struct {
	ref protocol.SnapshotRef
	doc []byte
	err error
}

// session is one connection. Its loop runs on Run's goroutine and owns all
// of this state; the reader goroutine and snapshot fetches only send to it.
type session struct {
	c    *Client
	ctx  context.Context
	ws   *websocket.Conn
	send func(ctx context.Context, b []byte) error // one text message; ws.Write but in tests
	q    *cmdQueue

	in      chan readItem
	stop    chan struct{} // closed at teardown: the reader discards instead of blocking
	rcancel context.CancelFunc
	fcancel context.CancelFunc // snapshot fetches
	wg      sync.WaitGroup

	ping       pinger
	gaps       gapTracker
	subs       map[string]string // SUBSCRIBE frameId -> groupId
	subscribed map[string]bool
	restoring  map[string]bool
	snaps      chan snapResult
	overlaps   map[string]overlapSub // groupId -> its last SUBSCRIBE below the cursor (diverge.go)

	timer   clock.Timer
	timerAt time.Time

	t      turn      // what this turn of the loop commits (turn.go)
	gather gathering // how long a small turn waits for more (gather.go)
}

// session dials, authenticates and serves one connection until it fails or
// ctx ends. established reports whether HELLO succeeded.
func (c *Client) session(ctx context.Context, q *cmdQueue, tr *http.Transport) (established bool, err error) {
	dctx, dcancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
	ws, resp, err := websocket.Dial(dctx, c.url.String(), &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	dcancel()
	if err != nil {
		err = fmt.Errorf("client: dial %s: %w", c.url.Redacted(), err)
		if d, ok := retryAfterHeader(resp); ok {
			return false, &busyError{retryAfter: d, err: err}
		}
		return false, err
	}
	ws.SetReadLimit(int64(c.cfg.MaxFrameBytes))
	// Reads are not tied to ctx: cancelling a coder/websocket Read closes
	// the connection at once, and shutdown wants a clean close handshake.
	rctx, rcancel := context.WithCancel(context.Background())
	fctx, fcancel := context.WithCancel(ctx)
	s := &session{
		c: c, ctx: fctx, ws: ws, q: q,
		send: func(ctx context.Context, b []byte) error { return ws.Write(ctx, websocket.MessageText, b) },
		in:   make(chan readItem, c.cfg.MaxBatch), stop: make(chan struct{}),
		rcancel: rcancel, fcancel: fcancel,
		gaps: newGapTracker(c.cfg.GapTimeout), subs: map[string]string{},
		subscribed: map[string]bool{}, restoring: map[string]bool{}, snaps: make(chan snapResult),
		overlaps: map[string]overlapSub{},
	}
	c.undrop("") // this connection streams only what it subscribes
	s.wg.Add(1)
	go s.read(rctx)
	defer func() { s.teardown(ctx.Err() != nil && err == nil) }()

	if err := s.hello(); err != nil {
		return false, err
	}
	for _, g := range c.wantedGroups() {
		if err := s.subscribe(g); err != nil {
			return true, err
		}
	}
	var outbox []*pendingCmd
	for e, err := range c.cfg.Store.Outbox() {
		if err != nil {
			return true, err
		}
		p := &pendingCmd{actionID: e.ActionID, groupID: e.GroupID, typ: e.Type, signed: e.Signed}
		if put, err := queue.NewOutboxPut(e.Signed); err == nil {
			p.issuedAt = put.IssuedAt
		}
		outbox = append(outbox, p)
	}
	q.sync(outbox)
	if err := s.finish(); err != nil {
		return true, err
	}
	return true, s.loop(ctx)
}

// read is the one reader the connection always has (coder/websocket needs
// it for control frames and the close handshake). Frames are decoded and
// verified by a pool of goroutines and reach the session in arrival order.
func (s *session) read(ctx context.Context) {
	defer s.wg.Done()
	opts := protocol.DecodeOptions{MaxBytes: s.c.cfg.MaxFrameBytes}
	keys := s.c.cfg.AuthorityKeys
	pool := newDecodePool(s.c.cfg.DecodeWorkers, s.c.cfg.MaxBatch,
		func(b []byte) (inbound, error) { return decodeInbound(b, opts, keys) }, s.in, s.stop, &s.wg)
	defer pool.close()
	for {
		typ, data, err := s.ws.Read(ctx)
		switch {
		case err != nil:
			pool.fail(fmt.Errorf("client: read: %w", err))
			return
		case typ != websocket.MessageText:
			pool.fail(protocol.Errorf(protocol.CodeProtocolViolation, "the authority sent a binary WebSocket message (spec 17.1)"))
			return
		default:
			pool.frame(data)
		}
	}
}

// teardown closes the connection (a close handshake when shutting down
// cleanly) and waits for every goroutine the session started.
func (s *session) teardown(clean bool) {
	close(s.stop)
	s.fcancel()
	if clean {
		s.ws.Close(websocket.StatusNormalClosure, "worker shutting down")
	} else {
		s.ws.CloseNow()
	}
	s.rcancel()
	s.wg.Wait()
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *session) now() time.Time { return s.c.cfg.Clock.Now() }

func (s *session) write(b []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.WriteTimeout)
	defer cancel()
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("client: write: %w", err)
	}
	return nil
}

// hello sends HELLO with a fresh signed proof and waits for the answer.
func (s *session) hello() error {
	c := s.c
	proof, err := newProof(c.cfg.Key, c.cfg.AgentID, c.cfg.SessionEpoch, newNonce(), s.now())
	if err != nil {
		return err
	}
	b, err := helloFrame(c.ids.frame(), c.cfg.AgentID, c.cfg.SessionEpoch, proof)
	if err != nil {
		return err
	}
	if err := s.write(b); err != nil {
		return err
	}
	t := c.cfg.Clock.NewTimer(c.cfg.HandshakeTimeout)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-t.C():
			return errors.New("client: no HELLO answer in time")
		case <-c.handKick:
			c.persistHanded(s.q)
		case it := <-s.in:
			switch {
			case it.err != nil:
				return it.err
			case it.bad != nil:
				return fmt.Errorf("client: HELLO answer: %w", it.bad)
			case it.f.errf != nil:
				if e := it.f.errf.Error; e.Code == protocol.CodeRateLimited {
					// Too many HELLOs from this address: come back when told.
					if d, ok := retryAfter(e); ok {
						return &busyError{retryAfter: d, err: e}
					}
				}
				return sessionError(it.f.errf.Error)
			case it.f.hello == nil:
				return protocol.Errorf(protocol.CodeProtocolViolation, "the authority sent %s before answering HELLO", it.f.typ)
			}
			h := it.f.hello
			if h.ProtocolVersion != protocol.Version {
				return protocol.Errorf(protocol.CodeUnsupportedVersion, "the authority chose protocolVersion %q; this worker speaks %q", h.ProtocolVersion, protocol.Version)
			}
			c.joined(h.Groups)
			s.ping = newPinger(c.cfg.PingInterval, c.cfg.PingTimeout, s.now())
			c.setState(StateChange{State: StateConnected, SessionEpoch: h.SessionEpoch, ServerTime: h.ServerTime.Time})
			return nil
		}
	}
}

// busyError is a dial the authority refused with HTTP 503 and a
// Retry-After (its connection caps), or a HELLO it refused with
// RATE_LIMITED and retryAfterMs: Run waits at least that long.
type busyError struct {
	retryAfter time.Duration
	err        error
}

func (e *busyError) Error() string {
	return fmt.Sprintf("%v (the authority asked to retry after %s)", e.err, e.retryAfter)
}

func (e *busyError) Unwrap() error { return e.err }

// retryAfterHeader reads the delay of a 503 answer's Retry-After, in
// seconds (the form the authority sends; an HTTP date is ignored).
func retryAfterHeader(resp *http.Response) (time.Duration, bool) {
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(resp.Header.Get("Retry-After")), 10, 32)
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// sessionError turns an ERROR about the session itself into Run's error.
func sessionError(e *protocol.Error) error {
	if e.Code == protocol.CodeAuthStaleSession {
		return fmt.Errorf("%w: %w", ErrSessionReplaced, e)
	}
	return e
}

// subscribeFrom (re)subscribes a Group after a position.
func (s *session) subscribeFrom(group string, after uint64) error {
	_, err := s.sendSubscribe(group, after)
	return err
}

// sendSubscribe sends a Group's SUBSCRIBE and returns its frameId.
func (s *session) sendSubscribe(group string, after uint64) (string, error) {
	fid := s.c.ids.frame()
	b, err := subscribeFrame(fid, group, after)
	if err != nil {
		return "", err
	}
	s.subs[fid] = group
	s.subscribed[group] = true
	s.c.undrop(group)
	s.gaps.forget(group)
	return fid, s.write(b)
}

// flush sends every Command that may go now, in order.
func (s *session) flush() error {
	for _, p := range s.q.sendable(s.now()) {
		if p.stale(s.now(), s.c.cfg.Freshness) {
			s.c.log.Info("Command not sent: its freshness window passed", "action", p.actionID)
			if err := s.answer(p, cmdResult{err: ErrStale}); err != nil {
				return err
			}
			continue
		}
		fid := s.c.ids.frame()
		if err := s.write(commandFrame(fid, p.signed)); err != nil {
			return err
		}
		s.q.sent(p, fid)
	}
	return nil
}

// loop serves the connection in turns: it waits for something to do,
// takes with it everything else already waiting (drain), then commits
// what the turn gathered in one store transaction and only then ACKs,
// sends and answers (finish).
func (s *session) loop(ctx context.Context) error {
	for {
		s.arm()
		var tc <-chan time.Time
		if s.timer != nil {
			tc = s.timer.C()
		}
		var err error
		select {
		case <-ctx.Done():
			if !s.t.empty() { // a held turn: record what it answered
				_ = s.finish()
			}
			return nil
		case <-s.gather.c():
			s.gather.timer, s.gather.expired = nil, true
		case it := <-s.in:
			err = s.onItem(it)
		case <-s.c.handKick:
			s.take()
		case <-s.c.kick:
			err = s.onKick()
		case r := <-s.snaps:
			err = s.restored(r)
		case <-tc:
			s.timerAt = time.Time{}
			err = s.tick()
		}
		if err == nil {
			err = s.drain()
		}
		if err == nil && s.holdTurn() {
			continue
		}
		// Also after an error: a Command taken is recorded or answered,
		// never left half done.
		if ferr := s.finish(); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
	}
}

func (s *session) onKick() error {
	for _, g := range s.c.wantedGroups() {
		if !s.subscribed[g] {
			if err := s.subscribe(g); err != nil {
				return err
			}
		}
	}
	for g, after := range s.c.takeReplays() {
		if _, diverged := s.c.cfg.Store.Divergence(g); diverged {
			continue
		}
		if err := s.subscribeFrom(g, min(after, s.c.cfg.Store.Cursor(g))); err != nil {
			return err
		}
	}
	return nil
}

// arm keeps one timer set for the earliest thing the loop must do on its
// own: ping, give up on a ping, end a pause, replay a gap.
func (s *session) arm() {
	w := earliest(s.ping.next(), s.q.nextWake(), s.gaps.next())
	if w.ok && s.timer != nil && w.at.Equal(s.timerAt) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if w.ok {
		s.timer, s.timerAt = s.c.cfg.Clock.NewTimer(w.at.Sub(s.now())), w.at
	}
}

func (s *session) tick() error {
	now := s.now()
	if s.ping.expired(now) {
		return errPingTimeout
	}
	if s.ping.due(now) {
		nonce := newNonce()
		var pr *protocol.PresenceRecord
		if s.c.cfg.Presence != nil {
			pr = s.c.cfg.Presence()
		}
		b, err := pingFrame(s.c.ids.frame(), nonce, pr, false)
		if err != nil {
			return err
		}
		if err := s.write(b); err != nil {
			return err
		}
		s.ping.sent(nonce, now)
	}
	for _, g := range s.gaps.due(now) {
		s.c.log.Info("replaying group after a gap", "group", g, "cursor", s.c.cfg.Store.Cursor(g))
		if err := s.subscribe(g); err != nil {
			return err
		}
	}
	return nil // the turn's finish sends what a pause held back
}

// onItem handles one read item: an EVENT joins the turn's batch, any
// other frame is handled at once.
func (s *session) onItem(it readItem) error {
	switch {
	case it.isEvent():
		if g := it.f.event.Event.GroupID; s.c.isDropped(g) {
			// The stream of a Group the worker forgot runs on until the
			// next connection (the binding has no UNSUBSCRIBE): its
			// events are neither applied nor a gap to replay.
			delete(s.subscribed, g)
			s.gaps.forget(g)
			return nil
		}
		s.t.events = append(s.t.events, it.f.event)
		return nil
	case it.err != nil:
		return it.err
	case it.bad != nil:
		s.c.log.Warn("ignoring a frame from the authority", "err", it.bad)
		return nil
	}
	return s.dispatch(it.f)
}
