package client

import (
	"errors"
	"fmt"
	"slices"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// dispatch handles one non-EVENT frame.
func (s *session) dispatch(f inbound) error {
	switch {
	case f.ack != nil:
		return s.onReceipt(f.ack)
	case f.errf != nil:
		return s.onError(f.errf)
	case f.ping != nil:
		if f.ping.Reply {
			if !s.ping.echo(f.ping.Nonce) {
				s.c.log.Debug("PING reply with an unknown nonce", "nonce", f.ping.Nonce)
			}
			return nil
		}
		b, err := pingFrame(s.c.ids.frame(), f.ping.Nonce, nil, true)
		if err != nil {
			return err
		}
		return s.write(b)
	case f.bp != nil:
		// Only this Group's Commands wait; ACKs and other Groups go on
		// (spec 17.3).
		s.q.pause(f.bp.GroupID, s.now().Add(pauseFor(float64(f.bp.RetryAfterMs))))
		return nil
	case f.grps != nil:
		s.c.joined(f.grps.Groups)
	case f.hello != nil:
		s.c.log.Warn("ignoring a second HELLO from the authority")
	}
	return nil
}

// applied ACKs what a committed batch of events made durable and follows
// up on the rest of its result.
func (s *session) applied(batch []queue.Incoming, res queue.Result) error {
	if err := s.ack(res.Cursors); err != nil {
		return err
	}
	var touched []string
	for _, in := range batch {
		if g := in.Event.GroupID; g != "" && !slices.Contains(touched, g) {
			touched = append(touched, g)
		}
	}
	gapped := make(map[string]bool, len(res.Gaps))
	for _, g := range res.Gaps {
		gapped[g.GroupID] = true
	}
	s.gaps.update(touched, gapped, s.now())
	var dropped []string
	for _, r := range res.Dropped {
		if !slices.Contains(dropped, r.GroupID) {
			dropped = append(dropped, r.GroupID)
		}
	}
	slices.Sort(dropped)
	for _, g := range dropped {
		// The reorder buffer overflowed: ask for a replay right away.
		if err := s.subscribe(g); err != nil {
			return err
		}
	}
	for _, d := range res.Diverged {
		s.logDiverged(d)
	}
	for _, p := range res.Rejected {
		if s.c.diverged(p.GroupID) { // said once, above
			s.c.log.Debug("store rejected an event of a diverged group", "group", p.GroupID, "event", p.EventID, "sequence", p.Sequence)
			continue
		}
		s.c.log.Warn("store rejected an event", "group", p.GroupID, "event", p.EventID, "sequence", p.Sequence, "err", p.Err)
	}
	for _, p := range res.Problems {
		s.c.log.Warn("applied an event the worker's view cannot interpret; the view ignores it", "group", p.GroupID, "event", p.EventID, "sequence", p.Sequence, "err", p.Err)
	}
	if s.c.cfg.OnApplied != nil {
		s.c.cfg.OnApplied(res)
	}
	return nil
}

// ack reports durable cursors: only values the store returned after its
// transaction committed, never anything merely received.
func (s *session) ack(cursors []protocol.Cursor) error {
	if len(cursors) == 0 {
		return nil
	}
	b, err := ackFrame(s.c.ids.frame(), cursors)
	if err != nil {
		return err
	}
	return s.write(b)
}

func (s *session) onReceipt(a *protocol.AckFrame) error {
	p := s.q.byFrameID(a.InReplyTo)
	if p == nil {
		s.c.log.Debug("receipt for an unknown COMMAND frame", "inReplyTo", a.InReplyTo)
		return nil
	}
	if a.Receipt.ActionID != p.actionID {
		// Keep the Command: its real answer may still come, or a resend
		// after reconnecting gets it.
		s.c.log.Warn("receipt names another action", "want", p.actionID, "got", a.Receipt.ActionID)
		return nil
	}
	return s.answer(p, cmdResult{receipt: a.Receipt})
}

// answer takes an answered Command out of the queue; the turn's commit
// takes it out of the outbox, then its waiters are woken.
func (s *session) answer(p *pendingCmd, r cmdResult) error {
	s.q.remove(p)
	s.t.answers = append(s.t.answers, answered{p, r})
	return nil
}

func (s *session) onError(f *protocol.ErrorFrame) error {
	e := f.Error
	irt := f.InReplyTo
	if irt == "" {
		irt = e.InReplyTo
	}
	if g, last, ok := aheadOfLog(e); ok { // a SUBSCRIBE's or an ACK's
		return s.onAhead(g, last)
	}
	if p := s.q.byFrameID(irt); p != nil {
		if (e.Code == protocol.CodeRateLimited || e.Code == protocol.CodeBackpressure) && !p.advisory {
			d, ok := retryAfter(e)
			if !ok {
				d = s.c.cfg.RetryDelay
			}
			s.q.pause(p.groupID, s.now().Add(d))
			s.q.retry(p)
			return nil
		}
		if err := s.answer(p, cmdResult{err: e}); err != nil {
			return err
		}
		if e.Code == protocol.CodeAuthStaleSession {
			return sessionError(e)
		}
		return nil
	}
	if g, ok := s.subs[irt]; ok {
		if ok, err := s.overlapTooOld(g, irt, e); ok {
			return err
		}
		return s.onGroupError(g, e)
	}
	switch e.Code {
	case protocol.CodeAuthStaleSession, protocol.CodeUnsupportedVersion, protocol.CodeAuthRequired:
		return sessionError(e)
	case protocol.CodeCursorTooOld:
		if ref, ok := group.SnapshotRefOf(e); ok {
			return s.onGroupError(ref.GroupID, e)
		}
	case protocol.CodeGroupNotFound:
		if g, ok := e.Details["groupId"].(string); ok && g != "" {
			return s.onGroupError(g, e)
		}
	}
	s.c.log.Warn("error from the authority", "code", e.Code, "message", e.Message, "inReplyTo", irt)
	return nil
}

// onGroupError handles an ERROR about one Group's subscription.
func (s *session) onGroupError(g string, e *protocol.Error) error {
	if s.c.isDropped(g) {
		// The end of a forgotten Group's stream (the authority purged it:
		// GROUP_NOT_FOUND) is no refusal to subscribe again after.
		delete(s.subscribed, g)
		s.gaps.forget(g)
		return nil
	}
	switch e.Code {
	case protocol.CodeCursorTooOld:
		ref, ok := group.SnapshotRefOf(e)
		switch {
		case !ok || ref.GroupID != g:
			s.rejectGroup(g, fmt.Errorf("CURSOR_TOO_OLD without a snapshot reference for group %s: %w", g, e))
		case s.c.cfg.FetchSnapshot == nil:
			s.rejectGroup(g, fmt.Errorf("no snapshot fetcher configured: %w", e))
		default:
			s.startRestore(ref)
		}
	case protocol.CodeGroupNotFound:
		s.rejectGroup(g, e)
	default:
		s.c.log.Warn("subscription error", "group", g, "code", e.Code, "message", e.Message)
	}
	return nil
}

func (s *session) rejectGroup(g string, err error) {
	delete(s.subscribed, g)
	s.gaps.forget(g)
	s.c.reject(g, err)
}

// startRestore fetches a snapshot off the loop; restored gets the result.
func (s *session) startRestore(ref protocol.SnapshotRef) {
	g := ref.GroupID
	if s.restoring[g] {
		return
	}
	s.restoring[g] = true
	s.gaps.forget(g)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		doc, err := s.c.cfg.FetchSnapshot(s.ctx, ref)
		select {
		case s.snaps <- snapResult{ref: ref, doc: doc, err: err}:
		case <-s.stop:
		}
	}()
}

// restored installs a fetched snapshot and replays the Group after it. A
// failure is retried like a gap: re-subscribing brings CURSOR_TOO_OLD and a
// new fetch after GapTimeout.
func (s *session) restored(r snapResult) error {
	g := r.ref.GroupID
	delete(s.restoring, g)
	err := r.err
	if err == nil {
		var res queue.Result
		res, err = s.c.cfg.Store.RestoreSnapshot(r.ref, r.doc, s.c.cfg.VerifySnapshot)
		if errors.Is(err, queue.ErrClosed) {
			return err
		}
		if err == nil {
			if err := s.ack(res.Cursors); err != nil {
				return err
			}
			if s.c.cfg.OnApplied != nil {
				s.c.cfg.OnApplied(res)
			}
		}
	}
	if err != nil {
		s.c.log.Warn("snapshot restore failed; retrying", "group", g, "snapshot", r.ref.SnapshotID, "err", err)
		s.gaps.retry(g, s.now())
		return nil
	}
	return s.subscribe(g)
}
