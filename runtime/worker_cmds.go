package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
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

// pump sends the head of the item's chain. Only while online: a command
// signed now and delivered after a long outage would be stale, and
// non-bufferable commands wait for reconciliation anyway (spec 11.5).
func (e *engine) pump(it *item) {
	for !it.sending && len(it.cmds) > 0 && e.mon.State() == stateOnline && e.fatal == nil {
		// A Group command needs the worker's current membership epoch:
		// none known yet, or the one the authority just called stale, and
		// it waits for the view (onApplied pumps again).
		mepoch := e.members[it.key.group]
		if mepoch == 0 || mepoch == it.staleMembership || it.conflict != nil || e.awaitingOwn(it) {
			return
		}
		c := it.cmds[0]
		now := e.cfg.Clock.Now()
		if !c.due(now) {
			return // step pumps it again when the back-off has passed
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
		it.sending = true
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
	it.sending = false
	if e.again(it, m, now) {
		return
	}
	e.settle(it, m, now)
}

// settle takes an answered command off its item's chain and does what the
// answer calls for.
func (e *engine) settle(it *item, m msgSent, now time.Time) {
	if len(it.cmds) > 0 && it.cmds[0] == m.cmd {
		it.cmds = it.cmds[1:]
	}
	code := protocol.CodeOf(m.err)
	if m.err != nil && !answered(m.err) {
		// No answer (the worker is stopping, or its connection is gone
		// for good): nothing was refused, and the command stays in the
		// outbox for the next run.
		e.log.Info("command unanswered", "type", m.typ, "item", m.key.sched(), "err", m.err)
		e.next(it)
		return
	}
	if m.err == nil {
		it.sentApplied(m.receipt)
	}
	if m.err != nil {
		e.log.Info("command refused", "type", m.typ, "item", m.key.sched(), "err", m.err)
		if code == protocol.CodeAuthStaleSession && e.fatal == nil {
			e.fatal = errSessionReplacedBy(m.err)
		}
	}
	fenced := code == protocol.CodeWorkStaleOwnership || code == protocol.CodeWorkLeaseExpired || code == protocol.CodeAuthForbidden
	if fenced {
		e.w.m.fenced.WithLabelValues(string(code)).Inc()
	}
	switch m.typ {
	case protocol.CmdWorkAcceptOffer:
		if p, _ := m.payload.(*protocol.AcceptOfferPayload); p != nil && it.phase != phAccepting {
			e.renewalAnswered(it, p.ContractRevision, m.err)
			break
		}
		if m.err != nil {
			e.log_.admissionErr(m.key, it.offerID, m.err)
			if code == protocol.CodeRevisionConflict && it.phase == phAccepting {
				// The contract was revised while the acceptance was out:
				// judge the offer again on the revised contract.
				e.drop(it)
				if e.items[m.key] == nil {
					e.sync(m.key)
				}
				break
			}
			e.refused[m.key] = refusal{offerID: it.offerID}
			e.drop(it)
		}
	case protocol.CmdWorkStart:
		if it.phase != phStarting {
			break
		}
		if m.err != nil {
			if fenced {
				e.endRun(it, false, now)
				e.drop(it)
				break
			}
			e.endRun(it, true, now)
			if detail(m.err, "reason") == "renewed_acceptance_required" {
				// The contract was revised after this worker accepted it
				// and the view did not show it: renew, then start.
				it.phase, it.forceRenew = phQueued, true
				e.sync(m.key)
				break
			}
			if !answered(m.err) {
				// No answer came (the connection went): back to the
				// queue to be started again. Had the authority applied
				// it, a new start is refused (the item is active) and
				// nothing runs twice; the lease it granted is this
				// session's and is adopted when the store shows it (sync).
				it.phase = phQueued
				e.sync(m.key)
				break
			}
			// Not startable now (dependencies, approval, deadline):
			// back to the queue, held until its view changes.
			it.phase, it.hold = phQueued, true
			e.holdGate(it, now)
			break
		}
		e.sync(m.key) // the lease may already be in the store
	case protocol.CmdLeaseRenew:
		it.renewing = false
		it.retryAt = now.Add(e.cfg.Tick)
		if m.err == nil {
			it.renewals++
			e.w.m.renewals.WithLabelValues("renewed").Inc()
			break
		}
		e.w.m.renewals.WithLabelValues("refused").Inc()
		if fenced && it.phase == phRunning {
			e.leaseLost(it, "renewal refused: "+string(code), now)
		}
	case protocol.CmdWorkCheckpoint:
		e.log_.sent(m.key, string(m.typ), m.err)
		e.releaseAfterCheckpoint(it, now)
		if it.phase == phFinishing && m.err == nil && !e.draining {
			it.phase, it.hold = phQueued, false
			e.sync(m.key)
		}
	case protocol.CmdWorkSubmit:
		e.log_.sent(m.key, string(m.typ), m.err)
		if m.err == nil {
			e.track(it, true)
			break
		}
		e.submitRefused(it, m, now)
	case protocol.CmdWorkBlock, protocol.CmdWorkFail:
		e.log_.sent(m.key, string(m.typ), m.err)
	case protocol.CmdArtifactPublish:
		if m.err != nil {
			e.log.Warn("artifact.publish refused", "item", m.key.sched(), "err", m.err)
		}
	}
	e.next(it)
}

// next sends the item's next command, or forgets a finished item whose
// commands are all answered.
func (e *engine) next(it *item) {
	e.pump(it)
	if it.phase == phFinishing && len(it.cmds) == 0 && !it.sending {
		e.forget(it)
		if !e.draining {
			e.sync(it.key) // the authority may have queued it for us again
		}
	}
}

// renewalAnswered settles a renewed acceptance (spec 10.1). Accepted (or
// already recorded: WORK_ALREADY_OWNED answers an owner whose accepted
// revision is current), the item may start. Refused, it stays held and
// is not sent again for that revision: a newer revision in between
// (REVISION_CONFLICT) is judged when its event arrives, and any other
// refusal ends when the authority moves the item.
func (e *engine) renewalAnswered(it *item, rev uint64, err error) {
	if code := protocol.CodeOf(err); err != nil && code != protocol.CodeWorkAlreadyOwned {
		e.log.Warn("renewed acceptance refused", "item", it.key.sched(), "contractRevision", rev, "err", err)
		return
	}
	it.reaccepted = max(it.reaccepted, rev)
	if it.reaccepting == rev {
		it.reaccepting = 0
	}
	if it.phase == phQueued {
		e.sync(it.key)
	}
}

// detail is one member of a protocol error's details, as a string.
func detail(err error, key string) string {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return ""
	}
	s, _ := pe.Details[key].(string)
	return s
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
