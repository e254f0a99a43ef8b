package client

import (
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// turn is what one turn of the session loop gathers for its one store
// transaction (group commit): the events received, the Commands to record
// before they may be sent, and the answered Commands to take out of the
// outbox. Nothing of it reaches the authority or a waiter before that
// transaction commits: an ACK never precedes the durable cursor, a
// Command never leaves before it is in the outbox, and a waiter learns of
// an answer only once the outbox no longer holds its Command.
type turn struct {
	events  []queue.Incoming
	puts    []*pendingCmd // not in the cmdQueue until durable
	answers []answered
}

// answered is a Command taken out of the cmdQueue, its waiters still to
// be told.
type answered struct {
	p *pendingCmd
	r cmdResult
}

func (t *turn) size() int { return len(t.events) + len(t.puts) + len(t.answers) }

// holds says whether the turn has the event at seq of group.
func (t *turn) holds(group string, seq uint64) bool {
	for _, in := range t.events {
		if e := in.Event; e != nil && e.GroupID == group && e.Sequence != nil && *e.Sequence == seq {
			return true
		}
	}
	return false
}

func (t *turn) empty() bool {
	return len(t.events) == 0 && len(t.puts) == 0 && len(t.answers) == 0
}

// deliver wakes the waiters of the turn's answered Commands.
func (t *turn) deliver() {
	for _, a := range t.answers {
		for _, w := range a.p.waiters {
			deliver(w, a.r)
		}
	}
	t.answers = nil
}

// take gathers the Commands handed to Send into the turn.
func (s *session) take() {
	for _, p := range s.c.takeHanded(s.c.cfg.MaxBatch - len(s.t.puts)) {
		s.t.puts = append(s.t.puts, p)
		if s.c.hookQueued != nil {
			s.c.hookQueued(p.actionID)
		}
	}
}

// drain takes, without waiting, what else is ready: frames read and
// Commands handed to Send, up to MaxBatch of each a turn.
func (s *session) drain() error {
	for len(s.t.events) < s.c.cfg.MaxBatch {
		s.take()
		select {
		case it := <-s.in:
			if err := s.onItem(it); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	s.take()
	return nil
}

// finish commits the turn, then ACKs the cursors it made durable, tells
// the runtime, answers the waiters and sends what may go now. Sending can
// answer a stale Command, which takes one more commit.
func (s *session) finish() error {
	for {
		if !s.t.empty() {
			events, n, start := s.t.events, s.t.size(), time.Now()
			res, err := s.c.commitTurn(s.q, &s.t)
			s.gather.committed(n, len(s.in)+s.c.handedCount(), time.Since(start))
			if err != nil {
				// Nothing of the turn is durable; reconnecting replays the
				// events from the durable cursors and resends the outbox.
				s.t.deliver()
				return fmt.Errorf("client: store: %w", err)
			}
			if len(events) > 0 {
				if err := s.applied(events, res); err != nil {
					s.t.deliver()
					return err
				}
			}
			s.t.deliver()
		}
		if err := s.flush(); err != nil {
			return err
		}
		if s.t.empty() {
			return nil
		}
	}
}

// commitTurn commits t's events, puts and removals in one transaction.
// A put that committed joins q, ready to send; one refused or lost with
// a failed transaction is answered with the error. Answers stay in t for
// deliver.
func (c *Client) commitTurn(q *cmdQueue, t *turn) (queue.Result, error) {
	b := queue.Batch{Events: t.events}
	for _, p := range t.puts {
		b.Puts = append(b.Puts, queue.OutboxPut{ActionID: p.actionID, Type: p.typ, GroupID: p.groupID, IssuedAt: p.issuedAt, Signed: p.signed})
	}
	for _, a := range t.answers {
		b.Answered = append(b.Answered, a.p.actionID)
	}
	res, err := c.cfg.Store.Commit(b)
	refused := make(map[string]*protocol.Error, len(res.PutRefused))
	for _, r := range res.PutRefused {
		refused[r.ActionID] = r.Err
	}
	for _, p := range t.puts {
		switch {
		case err != nil:
			t.answers = append(t.answers, answered{p, cmdResult{err: err}})
		case refused[p.actionID] != nil:
			t.answers = append(t.answers, answered{p, cmdResult{err: refused[p.actionID]}})
		default:
			q.add(p)
		}
	}
	t.events, t.puts = nil, nil
	return res, err
}
