package wss

import (
	"context"
	"sync"

	"github.com/missionweave/mwp-worker/protocol"
)

// commandLanes runs COMMANDs: one lane per Group, in arrival order within a
// Group (a pipelined work.start then work.checkpoint must reach the
// authority in that order) and concurrently across Groups. A lane's
// goroutine exists only while it has work.
type commandLanes struct {
	mu      sync.Mutex
	lanes   map[string]*cmdLane
	pending int // queued or running, over all lanes
	max     int
	run     func(submission)
	wg      *sync.WaitGroup
}

type cmdLane struct {
	q []submission
}

func newCommandLanes(max int, wg *sync.WaitGroup, run func(submission)) *commandLanes {
	return &commandLanes{lanes: map[string]*cmdLane{}, max: max, run: run, wg: wg}
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
		l.run(s)
		l.mu.Lock()
		l.pending--
		l.mu.Unlock()
	}
}

// submit runs one command through the Backend and queues its answer.
func (c *conn) submit(ctx context.Context, s submission) {
	var frame []byte
	rc, err := c.b.Submit(ctx, s.peer, s.raw)
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
		frame = encodeError(c.ids.next(), wireError(err, s.frameID, s.actionID))
	}
	c.out.pushControl(ctx, frame)
}

// busy answers a command refused because too many are pending.
func busy(s submission) *protocol.Error {
	return wireError(protocol.Errorf(protocol.CodeBackpressure, "too many commands pending on this connection; resend unchanged later"), s.frameID, s.actionID)
}
