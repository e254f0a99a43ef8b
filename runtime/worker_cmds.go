package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime/client"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
)

// itemCmd is one command of an item, built (signed) when it is first sent
// so it carries the current epochs and a fresh issuedAt.
type itemCmd struct {
	typ     protocol.CommandType
	payload any
	// raw is the signed command once built: a retryable answer resends
	// these bytes (same actionId, spec 19); nil builds it again (a new
	// actionId, issuedAt and signature).
	raw      []byte
	expected *uint64   // the expectedRevision raw carries
	tries    int       // retryable answers so far
	retryAt  time.Time // a retry waits until then
}

// msgSent is the authority's answer to one command.
type msgSent struct {
	key     itemKey
	cmd     *itemCmd
	typ     protocol.CommandType
	payload any
	mepoch  uint64 // the membership epoch it was signed with
	receipt *protocol.Receipt
	err     error
}

// commandFreshness is how long after its issuedAt a command may still be
// sent (client.Config.Freshness): half the authority's freshness window
// (protocol.DefaultMaxSkew), leaving the rest for clock offset and transit.
const commandFreshness = protocol.DefaultMaxSkew / 2

// sendFunc hands one signed command to the connection without blocking
// and returns the wait for its answer (client.Client.Hand). Handing it on
// the engine's goroutine, under the engine's Hold, lets the commands of
// one round of decisions share one outbox transaction.
type sendFunc func(ctx context.Context, signed []byte) (wait func() (*protocol.Receipt, error))

// queueCmd appends a command to the item's chain and sends it when it
// reaches the head.
func (e *engine) queueCmd(it *item, typ protocol.CommandType, payload any) {
	it.cmds = append(it.cmds, &itemCmd{typ: typ, payload: payload})
	e.pump(it)
}

// pump sends the head of the item's chain, once lc.Step (Due) lets it go.
// Only while online: a command signed now and delivered after a long
// outage would be stale, and non-bufferable commands wait for
// reconciliation anyway (spec 11.5).
func (e *engine) pump(it *item) {
	for !it.Sending && len(it.cmds) > 0 && e.mon.State() == stateOnline && e.fatal == nil {
		c := it.cmds[0]
		now := e.cfg.Clock.Now()
		mepoch := e.members[it.key.group]
		in := lc.Due{Type: c.typ, Payload: c.payload, Online: true, Membership: mepoch, Cursor: e.store.Cursor(it.key.group),
			Conflicted: it.conflict != nil, RetryAt: c.retryAt}
		if lc.LeaseOf(c.payload) != "" {
			in.Expires = e.leaseExpiry(it)
		}
		var effs []lc.Effect
		it.Item, effs = lc.Step(it.core(), in, now)
		if len(effs) > 0 {
			if w, ok := effs[0].(lc.Withhold); ok {
				e.withhold(it, c, w.Why)
				continue
			}
			return // lc.Wait: the view, an answer or step pumps it again
		}
		if c.raw == nil {
			c.expected = e.expectedRevision(it, c.typ)
			raw, err := e.build(it, c.typ, c.payload, c.expected, now)
			if err != nil {
				e.log.Error("build command", "type", c.typ, "item", it.key.sched(), "err", err)
				it.cmds = it.cmds[1:]
				continue
			}
			c.raw = raw
		}
		it.Sending = true
		e.inflight++
		k, start := it.key, time.Now()
		e.w.m.sending()
		wait := e.send(e.sendCtx, c.raw)
		go func() {
			r, err := wait()
			e.w.m.sent(c.typ, time.Since(start), err)
			e.mb.post(msgSent{key: k, cmd: c, typ: c.typ, payload: c.payload, mepoch: mepoch, receipt: r, err: err})
		}()
	}
}

// withhold drops the head command unsent, as lc decided: a submission,
// block or failure under a lease the worker's own clock has ended. A
// finished item left with nothing to send is forgotten from the loop
// (msgIdle), not from inside pump, whose callers still hold it.
func (e *engine) withhold(it *item, c *itemCmd, why string) {
	e.log.Warn("command not sent: "+why, "type", c.typ, "item", it.key.sched(), "lease", it.LeaseID)
	if c.typ == protocol.CmdWorkSubmit {
		e.log_.decided(it.key, string(c.typ), SubmitLeaseLost)
	}
	it.cmds = it.cmds[1:]
	if len(it.cmds) == 0 {
		e.mb.post(msgIdle{it.key})
	}
}

// build signs an agent command about it with this session's epochs and
// the revision it expects (nil: none).
func (e *engine) build(it *item, typ protocol.CommandType, payload any, expected *uint64, now time.Time) ([]byte, error) {
	env := protocol.Envelope{
		GroupID: it.key.group, SessionEpoch: protocol.Uint64(e.sess.epoch),
		MembershipEpoch: protocol.Uint64(e.members[it.key.group]), CorrelationID: it.missionID,
		ExpectedRevision: expected,
	}
	_, raw, err := protocol.BuildCommand(e.w.actor(), e.cfg.Key, typ, env, payload, now)
	return raw, err
}

// bufferCmd signs a bufferable command with the offline binding and appends
// it to the durable buffer (spec 11.5). usage is the binding's delta.
func (e *engine) bufferCmd(it *item, typ protocol.CommandType, payload any, usage protocol.Usage, now time.Time) error {
	b, err := e.mon.Binding(offlineItem(it.key), now, usage)
	if err != nil {
		return err
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	cmd := &protocol.Command{
		ActionID: protocol.NewActionID(now), ProtocolVersion: protocol.Version, Actor: e.w.actor(), Type: typ,
		GroupID: it.key.group, SessionEpoch: protocol.Uint64(e.sess.epoch), MembershipEpoch: protocol.Uint64(e.members[it.key.group]),
		CorrelationID: it.missionID, Payload: p,
	}
	if cmd.CorrelationID == "" {
		cmd.CorrelationID = cmd.ActionID
	}
	raw, err := signBuffered(cmd, b, e.cfg.Key)
	if err != nil {
		return err
	}
	if _, err := e.buf.Append(raw); err != nil {
		return err
	}
	e.log.Info("buffered offline", "type", typ, "item", it.key.sched(), "action", cmd.ActionID)
	return nil
}

// onSent settles one answered command and sends the item's next one.
func (e *engine) onSent(m msgSent, now time.Time) {
	it := e.items[m.key]
	if it == nil {
		return
	}
	it.Sending = false
	e.answer(it, m, false, now)
}

// answer feeds an answer to the item's lifecycle (lc.Step) and carries
// out what it decides. decided: a held revision conflict that no longer
// applies, settled as the refusal it was.
func (e *engine) answer(it *item, m msgSent, decided bool, now time.Time) {
	head := len(it.cmds) > 0 && it.cmds[0] == m.cmd
	in := lc.Answered{Type: m.typ, Payload: m.payload, Err: m.err, Head: head, Decided: decided,
		Stale:           errors.Is(m.err, client.ErrStale),
		Stopping:        e.sendCtx.Err() != nil || errors.Is(m.err, client.ErrNotRunning),
		MembershipEpoch: m.mepoch, Tick: e.cfg.Tick, AgentID: e.cfg.AgentID, Draining: e.draining, Online: e.mon.State() == stateOnline}
	if head {
		in.Tries = m.cmd.tries
	}
	var effs []lc.Effect
	it.Item, effs = lc.Step(it.core(), in, now)
	e.carry(it, cause{m: &m}, effs, now)
}

// next sends the item's next command, or forgets a finished item whose
// commands are all answered.
func (e *engine) next(it *item) {
	e.pump(it)
	if it.Phase == phFinishing && len(it.cmds) == 0 && !it.Sending {
		e.forget(it)
		if !e.draining {
			e.sync(it.key) // the authority may have queued it for us again
		}
	}
}

// holdGate keeps a queued item from starting until its view changes.
func (e *engine) holdGate(it *item, now time.Time) {
	en, ok := e.store.Item(it.key.group, it.key.id)
	if !ok {
		return
	}
	it.inSched = true
	si := e.schedItem(it.key, en, true)
	g := si.Gates
	_ = e.sched.Update(si.ID, scheduler.Change{Gates: &g}, now)
}

// track counts attempts (runs ended) and successes (submissions accepted) per capability: the reliability
// evidence of later selection bases (spec 10.3).
func (e *engine) track(it *item, success bool) {
	en, ok := e.store.Item(it.key.group, it.key.id)
	if !ok {
		return
	}
	for _, c := range en.Capabilities {
		r := e.reliability[c.ID]
		r.CapabilityID = c.ID
		if success {
			r.Successes++
		} else {
			r.Attempts++
		}
		e.reliability[c.ID] = r
	}
}
