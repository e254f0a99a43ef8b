package client

import (
	"context"
	"slices"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// Send records a signed Command in the durable outbox, sends it (now, or
// after reconnecting, always with the same bytes) and waits for the
// authority's answer: the receipt, or the *protocol.Error it returned
// (either way the Command leaves the outbox). RATE_LIMITED and BACKPRESSURE
// errors are retried after the delay they ask for instead. When ctx ends
// first, Send returns ctx.Err(); a Command the connection had already
// taken stays in the outbox, to be sent again on every reconnect until
// answered, and one it had not taken was never recorded or sent.
func (c *Client) Send(ctx context.Context, signed []byte) (*protocol.Receipt, error) {
	return c.Hand(ctx, signed).Wait()
}

// SendAdvisory is Send for a Command that is advice, such as a message
// telling the Group about a refused offer: a RATE_LIMITED or BACKPRESSURE
// answer is returned as the error instead of being retried, and it pauses
// none of the Group's other Commands, so a refused message never holds back
// the work Commands behind it. A BACKPRESSURE frame still holds it back.
func (c *Client) SendAdvisory(ctx context.Context, signed []byte) (*protocol.Receipt, error) {
	return c.hand(ctx, signed, true).Wait()
}

// Pending is a Command handed to the connection, its answer still to come.
type Pending struct {
	c   *Client
	ctx context.Context
	p   *pendingCmd
	w   chan cmdResult
	err error // refused when handed
}

// Hand is Send without the wait: it gives the Command to the connection
// without blocking and returns what waits for the answer. Commands handed
// together, or under one Hold, are recorded in one store transaction, in
// the order they were handed.
func (c *Client) Hand(ctx context.Context, signed []byte) *Pending {
	return c.hand(ctx, signed, false)
}

func (c *Client) hand(ctx context.Context, signed []byte, advisory bool) *Pending {
	put, err := queue.NewOutboxPut(signed)
	if err != nil {
		return &Pending{err: err}
	}
	w := make(chan cmdResult, 1)
	p := &pendingCmd{actionID: put.ActionID, groupID: put.GroupID, typ: put.Type, issuedAt: put.IssuedAt,
		signed: slices.Clone(signed), waiters: []chan cmdResult{w}, advisory: advisory}
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return &Pending{err: ErrNotRunning}
	}
	c.handed = append(c.handed, p)
	held := c.holds > 0
	c.mu.Unlock()
	if !held {
		c.kickHand()
	}
	return &Pending{c: c, ctx: ctx, p: p, w: w}
}

// Wait returns the answer to the handed Command, as Send does. When the
// Context given to Hand ends first it returns its error, and a Command the
// connection had not taken yet is withdrawn: never recorded or sent.
func (p *Pending) Wait() (*protocol.Receipt, error) {
	if p.err != nil {
		return nil, p.err
	}
	select {
	case r := <-p.w:
		return r.receipt, r.err
	case <-p.ctx.Done():
		p.c.withdraw(p.p)
		return nil, p.ctx.Err()
	}
}

// Hold keeps the connection from taking handed Commands until release is
// called, so that the Commands one decision hands one after another share
// one transaction instead of each taking a turn of its own. Holds nest.
// Keep them short: a held Command is neither recorded nor sent.
func (c *Client) Hold() (release func()) {
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
	released := false
	return func() {
		if released {
			return
		}
		released = true
		c.mu.Lock()
		c.holds--
		kick := c.holds == 0 && len(c.handed) > 0
		c.mu.Unlock()
		if kick {
			c.kickHand()
		}
	}
}

func (c *Client) kickHand() {
	select {
	case c.handKick <- struct{}{}:
	default:
	}
}

// handedCount is how many handed Commands wait to be taken.
func (c *Client) handedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.handed)
}

// takeHanded returns up to n handed Commands, oldest first, unless a Hold
// is active. What is left over is kicked for the next turn.
func (c *Client) takeHanded(n int) []*pendingCmd {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds > 0 || len(c.handed) == 0 || n <= 0 {
		return nil
	}
	n = min(n, len(c.handed))
	out := slices.Clone(c.handed[:n])
	c.handed = slices.Delete(c.handed, 0, n)
	if len(c.handed) > 0 {
		c.kickHand()
	}
	return out
}

// withdraw drops a Command its sender gave up on, if not yet taken.
func (c *Client) withdraw(p *pendingCmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.handed, p); i >= 0 {
		c.handed = slices.Delete(c.handed, i, i+1)
	}
}

// persistHanded records the handed Commands while no connection is being
// served (between connections, during HELLO), in one transaction.
func (c *Client) persistHanded(q *cmdQueue) {
	ps := c.takeHanded(c.cfg.MaxBatch)
	if len(ps) == 0 {
		return
	}
	t := turn{puts: ps}
	if _, err := c.commitTurn(q, &t); err != nil {
		c.log.Warn("outbox put failed", "commands", len(ps), "err", err)
	}
	t.deliver()
}
