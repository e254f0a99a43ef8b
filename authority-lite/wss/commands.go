package wss

import (
	"context"
	"sync"

	"github.com/missionweave/mwp-worker/protocol"
)

// commandLanes runs COMMANDs: one lane per Group, decided in arrival order
// within a Group (a pipelined work.start then work.checkpoint must reach
// the authority in that order) and concurrently across Groups. A lane's
// goroutine exists only while it has Commands to decide. With a Pipeliner
// backend a lane decides its next Command while the earlier ones wait for
// their commit; their answers still go out in arrival order.
type commandLanes struct {
	mu      sync.Mutex
	lanes   map[string]*cmdLane
	last    map[string]chan struct{} // by Group: closed once its newest begun Command is answered
	pending int                      // queued, deciding or awaiting durability, over all lanes
	max     int
	begin   func(submission) func() (*protocol.Receipt, error)
	answer  func(submission, *protocol.Receipt, error)
	wg      *sync.WaitGroup
	idleCh  chan struct{} // closed when pending drops to 0; nil if nobody waits
}

type cmdLane struct {
	q []submission
}

// newCommandLanes: begin decides one submission and returns the wait for
// its result; answer sends that result.
func newCommandLanes(max int, wg *sync.WaitGroup, begin func(submission) func() (*protocol.Receipt, error), answer func(submission, *protocol.Receipt, error)) *commandLanes {
	return &commandLanes{lanes: map[string]*cmdLane{}, last: map[string]chan struct{}{}, max: max, begin: begin, answer: answer, wg: wg}
}

// add queues s; false when the connection already has max commands pending.
func (l *commandLanes) add(s submission) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending >= l.max {
		return false
	}
	l.pending++
	ln, running := l.lanes[s.groupID]
	if !running {
		ln = &cmdLane{}
		l.lanes[s.groupID] = ln
	}
	ln.q = append(ln.q, s)
	if !running {
		l.wg.Go(func() { l.drain(s.groupID, ln) })
	}
	return true
}

func (l *commandLanes) drain(key string, ln *cmdLane) {
	for {
		l.mu.Lock()
		if len(ln.q) == 0 {
			delete(l.lanes, key)
			l.mu.Unlock()
			return
		}
		s := ln.q[0]
		ln.q = ln.q[1:]
		l.mu.Unlock()
		wait := l.begin(s)
		l.mu.Lock()
		before, done := l.last[key], make(chan struct{})
		l.last[key] = done
		l.mu.Unlock()
		l.wg.Go(func() {
			rc, err := wait()
			if before != nil {
				<-before
			}
			l.answer(s, rc, err)
			l.mu.Lock()
			if l.last[key] == done {
				delete(l.last, key)
			}
			l.pending--
			if l.pending == 0 && l.idleCh != nil {
				close(l.idleCh)
				l.idleCh = nil
			}
			l.mu.Unlock()
			close(done)
		})
	}
}

// idle returns a channel closed once no command is queued or running.
func (l *commandLanes) idle() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if l.idleCh == nil {
		l.idleCh = make(chan struct{})
	}
	return l.idleCh
}

// begin decides one command through the Backend and returns the wait for
// its result.
func (c *conn) begin(ctx context.Context, s submission) func() (*protocol.Receipt, error) {
	if c.sess.replaced() {
		err := c.sess.staleSession() // queued before the session was replaced
		return func() (*protocol.Receipt, error) { return nil, err }
	}
	if p, ok := c.b.(Pipeliner); ok {
		return p.Begin(ctx, s.peer, s.raw)
	}
	rc, err := c.b.Submit(ctx, s.peer, s.raw)
	return func() (*protocol.Receipt, error) { return rc, err }
}

// answer queues a command's ACK or ERROR.
func (c *conn) answer(ctx context.Context, s submission, rc *protocol.Receipt, err error) {
	var frame []byte
	if err == nil && rc == nil {
		err = protocol.Errorf(protocol.CodeInternalError, "backend returned no receipt")
	}
	if err == nil {
		frame, err = encodeAck(c.ids.next(), s.frameID, rc)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // the connection is gone; the client retries with the same actionId
		}
		if protocol.CodeOf(err) == protocol.CodeInternalError {
			c.log.Error("wss: submit failed", "peer", s.peer, "actionId", s.actionID, "err", err)
		}
		frame = encodeError(c.ids.next(), WireError(err, s.frameID, s.actionID))
	}
	c.out.pushControl(ctx, frame)
}

// busy answers a command refused because too many are pending.
func busy(s submission) *protocol.Error {
	return WireError(protocol.Errorf(protocol.CodeBackpressure, "too many commands pending on this connection; resend unchanged later"), s.frameID, s.actionID)
}
