package runtime

import (
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// maxLog bounds each decision log kept for Status.
const maxLog = 512

// statusLogs are the decisions kept for Status: admissions with their
// selection basis, scheduler picks, preemptions, outcomes, reconciliation.
type statusLogs struct {
	m           *metrics
	admissions  []AdmissionLog
	selections  []SelectionLog
	preemptions []PreemptionLog
	outcomes    []OutcomeLog
	reconciled  []ReconcileLog
	notices     []NoticeLog
}

func appendBounded[T any](s []T, v ...T) []T {
	s = append(s, v...)
	if len(s) > maxLog {
		s = slices.Clone(s[len(s)-maxLog:])
	}
	return s
}

func (l *statusLogs) admission(a AdmissionLog) { l.admissions = appendBounded(l.admissions, a) }

// admissionErr records the authority's refusal of an acceptance.
func (l *statusLogs) admissionErr(k itemKey, offerID string, err error) {
	for i := len(l.admissions) - 1; i >= 0; i-- {
		a := &l.admissions[i]
		if a.GroupID == k.group && a.WorkItemID == k.id && a.OfferID == offerID {
			a.Err = err.Error()
			return
		}
	}
}

func (l *statusLogs) selection(s SelectionLog) { l.selections = appendBounded(l.selections, s) }

func (l *statusLogs) preempt(k itemKey, forID, reason string, b scheduler.SelectionBasis, now time.Time) {
	if l.m != nil {
		l.m.preemptions.WithLabelValues(reason).Inc()
	}
	l.preemptions = appendBounded(l.preemptions, PreemptionLog{GroupID: k.group, WorkItemID: k.id, For: forID, Reason: reason, Basis: b, At: now})
}

// preemptRefused marks the item's last preemption as refused.
func (l *statusLogs) preemptRefused(k itemKey, now time.Time) {
	for i := len(l.preemptions) - 1; i >= 0; i-- {
		if p := &l.preemptions[i]; p.GroupID == k.group && p.WorkItemID == k.id {
			p.RefusedAt = &now
			return
		}
	}
}

func (l *statusLogs) outcome(o OutcomeLog) { l.outcomes = appendBounded(l.outcomes, o) }

// sent records the authority's answer to an outcome's command.
func (l *statusLogs) sent(k itemKey, typ string, err error) {
	for i := len(l.outcomes) - 1; i >= 0; i-- {
		o := &l.outcomes[i]
		if o.GroupID == k.group && o.WorkItemID == k.id && (o.Sent == typ || o.Sent == "held until reconciled") {
			o.Sent = typ
			if err != nil {
				o.Err = err.Error()
			}
			return
		}
	}
}

// decided records what the worker did about a refused command of an
// outcome.
func (l *statusLogs) decided(k itemKey, typ, decision string) {
	for i := len(l.outcomes) - 1; i >= 0; i-- {
		if o := &l.outcomes[i]; o.GroupID == k.group && o.WorkItemID == k.id && o.Sent == typ {
			o.Decision = decision
			return
		}
	}
}

func (l *statusLogs) notice(n NoticeLog) { l.notices = appendBounded(l.notices, n) }

// noticeState records how a notice was settled.
func (l *statusLogs) noticeState(messageID, state, why string) {
	for i := len(l.notices) - 1; i >= 0; i-- {
		n := &l.notices[i]
		if n.MessageID == messageID && n.State != noticeSkipped {
			n.State, n.Err = state, why
			return
		}
	}
}

func (l *statusLogs) addReconciled(r []ReconcileLog) {
	l.reconciled = appendBounded(l.reconciled, r...)
}

// publishStatus copies the loop's state into the Worker's status.
func (e *engine) publishStatus() {
	st := WorkerStatus{
		AgentID: e.cfg.AgentID, SessionEpoch: e.sess.epoch, Connection: e.connState.String(), Offline: e.mon.State().String(),
		Slots: int(e.cfg.Card.MaxConcurrency), FreeSlots: e.pool.Free(),
		Admissions: slices.Clone(e.log_.admissions), Selections: slices.Clone(e.log_.selections),
		Preemptions: slices.Clone(e.log_.preemptions), Outcomes: slices.Clone(e.log_.outcomes),
		Reconciled: slices.Clone(e.log_.reconciled), Notices: slices.Clone(e.log_.notices),
	}
	st.Queued, _ = e.sched.Len()
	counts := map[string]int{}
	for _, it := range e.items {
		counts[it.key.group]++
		if it.phase == phRunning {
			st.Running = append(st.Running, RunStatus{GroupID: it.key.group, WorkItemID: it.key.id, Slot: it.slot,
				LeaseID: it.leaseID, LeaseExpiresAt: it.expires, Renewals: it.renewals})
		}
	}
	slices.SortFunc(st.Running, func(a, b RunStatus) int { return a.Slot - b.Slot })
	for _, c := range e.store.Cursors() {
		gs := GroupStatus{GroupID: c.GroupID, Cursor: c.Sequence, Items: counts[c.GroupID]}
		if m, ok := e.store.Mission(c.GroupID); ok {
			gs.PriorityClass = m.PriorityClass
		}
		st.Groups = append(st.Groups, gs)
	}
	if n, _, err := e.buf.Len(); err == nil {
		st.Buffered = n
	}
	if e.fatal != nil {
		st.LastError = e.fatal.Error()
	}
	e.w.mu.Lock()
	e.w.status = st
	e.w.mu.Unlock()
}

func cloneStatus(s WorkerStatus) WorkerStatus {
	s.Running = slices.Clone(s.Running)
	s.Groups = slices.Clone(s.Groups)
	s.Admissions = slices.Clone(s.Admissions)
	s.Selections = slices.Clone(s.Selections)
	s.Preemptions = slices.Clone(s.Preemptions)
	s.Outcomes = slices.Clone(s.Outcomes)
	s.Reconciled = slices.Clone(s.Reconciled)
	s.Notices = slices.Clone(s.Notices)
	return s
}
