package client

import (
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The pure parts of the connection: which Commands to send now, when to
// ping and give up on a ping, and when a Group's gap has waited long enough
// to replay it. They take the time as an argument and do no I/O, so the
// session loop (session.go) only glues them to the socket and store.

// cmdResult answers one Send.
type cmdResult struct {
	receipt *protocol.Receipt
	err     error
}

// pendingCmd is a Command in the outbox, known to the client.
type pendingCmd struct {
	actionID string
	groupID  string // "" for Organization-scoped Commands: never paused
	typ      protocol.CommandType
	issuedAt time.Time // zero: unknown (no freshness check)
	signed   []byte
	frameID  string // COMMAND frame on the current connection; "" = not sent
	waiters  []chan cmdResult
	// advisory: a RATE_LIMITED or BACKPRESSURE answer settles it (see
	// Client.SendAdvisory) instead of pausing its Group.
	advisory bool
}

// cmdQueue orders Commands for sending. Commands go out in outbox order;
// a Group paused by BACKPRESSURE holds back its own Commands only.
type cmdQueue struct {
	list     []*pendingCmd
	byAction map[string]*pendingCmd
	byFrame  map[string]*pendingCmd
	paused   map[string]time.Time // groupId -> resume time
}

func newCmdQueue() *cmdQueue {
	return &cmdQueue{byAction: map[string]*pendingCmd{}, byFrame: map[string]*pendingCmd{}, paused: map[string]time.Time{}}
}

// add appends a Command, or attaches its waiter to the same actionId
// already queued. It reports whether the Command is new.
func (q *cmdQueue) add(p *pendingCmd) bool {
	if old := q.byAction[p.actionID]; old != nil {
		// Loaded from the outbox first (a connection started between the
		// put and this add): the caller's flag still counts.
		old.waiters = append(old.waiters, p.waiters...)
		old.advisory = old.advisory || p.advisory
		return false
	}
	q.list = append(q.list, p)
	q.byAction[p.actionID] = p
	return true
}

// sync makes the queue match the durable outbox at the start of a
// connection: every outbox entry in put order first (keeping waiters of
// entries already known), then the known Commands the outbox no longer
// holds (an event they caused was applied; a resend returns their receipt).
// Every Command counts as unsent on the new connection.
func (q *cmdQueue) sync(outbox []*pendingCmd) {
	list := make([]*pendingCmd, 0, len(outbox)+len(q.list))
	seen := make(map[string]bool, len(outbox))
	for _, e := range outbox {
		if seen[e.actionID] {
			continue
		}
		seen[e.actionID] = true
		if old := q.byAction[e.actionID]; old != nil {
			e.waiters, e.advisory = old.waiters, old.advisory
		}
		list = append(list, e)
	}
	for _, p := range q.list {
		if !seen[p.actionID] {
			list = append(list, p)
		}
	}
	q.list = list
	clear(q.byAction)
	clear(q.byFrame)
	for _, p := range list {
		p.frameID = ""
		q.byAction[p.actionID] = p
	}
}

// stale reports whether p may no longer be sent at now: its issuedAt is
// more than freshness ago (spec 19: such a Command is built again, never
// sent stale).
func (p *pendingCmd) stale(now time.Time, freshness time.Duration) bool {
	return freshness > 0 && !p.issuedAt.IsZero() && now.Sub(p.issuedAt) > freshness
}

// sendable returns the unsent Commands that may go out at now, in order.
func (q *cmdQueue) sendable(now time.Time) []*pendingCmd {
	var out []*pendingCmd
	for _, p := range q.list {
		if p.frameID == "" && !q.isPaused(p.groupID, now) {
			out = append(out, p)
		}
	}
	return out
}

func (q *cmdQueue) isPaused(group string, now time.Time) bool {
	until, ok := q.paused[group]
	if !ok {
		return false
	}
	if !now.Before(until) {
		delete(q.paused, group)
		return false
	}
	return true
}

// sent records that p went out in COMMAND frame frameID.
func (q *cmdQueue) sent(p *pendingCmd, frameID string) {
	p.frameID = frameID
	q.byFrame[frameID] = p
}

// byFrameID returns the Command sent in frameID, if any.
func (q *cmdQueue) byFrameID(frameID string) *pendingCmd {
	return q.byFrame[frameID]
}

// remove forgets an answered Command.
func (q *cmdQueue) remove(p *pendingCmd) {
	delete(q.byAction, p.actionID)
	if p.frameID != "" {
		delete(q.byFrame, p.frameID)
	}
	q.list = slices.DeleteFunc(q.list, func(x *pendingCmd) bool { return x == p })
}

// pause holds a Group's Commands until until; a later pause extends it,
// an earlier one never shortens it. Group "" holds the Organization-scoped
// Commands (a retryable error to one of them).
func (q *cmdQueue) pause(group string, until time.Time) {
	if cur, ok := q.paused[group]; !ok || until.After(cur) {
		q.paused[group] = until
	}
}

// retry marks a sent Command unsent again, to go out when its Group's
// pause ends.
func (q *cmdQueue) retry(p *pendingCmd) {
	if p.frameID != "" {
		delete(q.byFrame, p.frameID)
		p.frameID = ""
	}
}

// nextWake is the earliest pause end that holds back an unsent Command.
func (q *cmdQueue) nextWake() wake {
	var w wake
	for _, p := range q.list {
		if p.frameID != "" {
			continue
		}
		if until, ok := q.paused[p.groupID]; ok {
			w = earliest(w, wake{until, true})
		}
	}
	return w
}

// failAll answers every waiter with err; the Commands stay in the outbox.
func (q *cmdQueue) failAll(err error) {
	for _, p := range q.list {
		for _, w := range p.waiters {
			deliver(w, cmdResult{err: err})
		}
		p.waiters = nil
	}
}

// deliver never blocks: each waiter channel has room for one answer and a
// caller that gave up no longer reads it.
func deliver(w chan cmdResult, r cmdResult) {
	select {
	case w <- r:
	default:
	}
}

// pinger tracks our liveness PINGs: one outstanding at a time, sent
// interval after the previous one (or the connection start), and the
// connection is dead when its echo takes longer than timeout.
type pinger struct {
	interval, timeout time.Duration
	last              time.Time // last PING sent, or connection start
	nonce             string    // outstanding PING; "" when none
}

func newPinger(interval, timeout time.Duration, start time.Time) pinger {
	return pinger{interval: interval, timeout: timeout, last: start}
}

// due reports whether a PING should be sent at now.
func (p *pinger) due(now time.Time) bool {
	return p.interval > 0 && p.nonce == "" && !now.Before(p.last.Add(p.interval))
}

func (p *pinger) sent(nonce string, now time.Time) {
	p.nonce, p.last = nonce, now
}

// echo takes a PING reply and reports whether it answers the outstanding
// PING; any other nonce is ignored.
func (p *pinger) echo(nonce string) bool {
	if p.nonce == "" || nonce != p.nonce {
		return false
	}
	p.nonce = ""
	return true
}

// expired reports whether the outstanding PING went unanswered too long.
func (p *pinger) expired(now time.Time) bool {
	return p.nonce != "" && !now.Before(p.last.Add(p.timeout))
}

// next is when due or expired may next change.
func (p *pinger) next() wake {
	switch {
	case p.interval <= 0:
		return wake{}
	case p.nonce != "":
		return wake{p.last.Add(p.timeout), true}
	default:
		return wake{p.last.Add(p.interval), true}
	}
}

// gapTracker notices Groups whose events wait behind a missing sequence
// and says when to ask the authority to replay them (SUBSCRIBE from the
// durable cursor). Reordering within a connection heals by itself, so a
// gap is given timeout to fill first.
type gapTracker struct {
	timeout time.Duration
	since   map[string]time.Time
}

func newGapTracker(timeout time.Duration) gapTracker {
	return gapTracker{timeout: timeout, since: map[string]time.Time{}}
}

// update takes the Groups an Apply touched and those left waiting on a gap.
func (g *gapTracker) update(touched []string, gapped map[string]bool, now time.Time) {
	for _, id := range touched {
		if !gapped[id] {
			delete(g.since, id)
		} else if _, ok := g.since[id]; !ok {
			g.since[id] = now
		}
	}
}

// due returns, sorted, the Groups to replay at now, and restarts their
// wait so a replay is not requested again before it had time to arrive.
func (g *gapTracker) due(now time.Time) []string {
	var out []string
	for id, t := range g.since {
		if !now.Before(t.Add(g.timeout)) {
			out = append(out, id)
			g.since[id] = now
		}
	}
	slices.Sort(out)
	return out
}

// retry makes a Group due for replay timeout after now.
func (g *gapTracker) retry(id string, now time.Time) { g.since[id] = now }

// forget drops a Group (re-subscribed or rejected).
func (g *gapTracker) forget(id string) { delete(g.since, id) }

func (g *gapTracker) next() wake {
	var w wake
	for _, t := range g.since {
		w = earliest(w, wake{t.Add(g.timeout), true})
	}
	return w
}

// wake is an optional instant the session loop must wake up at.
type wake struct {
	at time.Time
	ok bool
}

// earliest returns the earliest of the set wakes.
func earliest(ws ...wake) wake {
	var out wake
	for _, w := range ws {
		if w.ok && (!out.ok || w.at.Before(out.at)) {
			out = w
		}
	}
	return out
}
