package runtime

import (
	"slices"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// maxLog bounds each decision log kept for Status.
const maxLog = 512

// statusLogs are the decisions kept for Status: admissions with their
// selection basis, scheduler picks, preemptions, outcomes, reconciliation.
type statusLogs struct {
	m           *metrics
	admissions  boundedLog[AdmissionLog]
	selections  boundedLog[SelectionLog]
	preemptions boundedLog[PreemptionLog]
	outcomes    boundedLog[OutcomeLog]
	reconciled  boundedLog[ReconcileLog]
	notices     boundedLog[NoticeLog]
}

// newStatusLogs returns logs whose entries are changed under mu, the lock
// Status copies them under.
func newStatusLogs(m *metrics, mu *sync.Mutex) statusLogs {
	return statusLogs{m: m, admissions: boundedLog[AdmissionLog]{mu: mu}, selections: boundedLog[SelectionLog]{mu: mu},
		preemptions: boundedLog[PreemptionLog]{mu: mu}, outcomes: boundedLog[OutcomeLog]{mu: mu},
		reconciled: boundedLog[ReconcileLog]{mu: mu}, notices: boundedLog[NoticeLog]{mu: mu}}
}

// boundedLog is one decision log, written by the engine's loop alone. Status
// gets it without a copy (publish, on every turn of the loop) and copies it
// under mu: appends write past the end it was given, and an entry is changed
// in place only under mu. (Copying the log on every change instead cost
// about 90 KB of garbage an item at 8 lanes.)
type boundedLog[T any] struct {
	s  []T
	mu *sync.Mutex
}

func (l *boundedLog[T]) add(v ...T) {
	l.s = append(l.s, v...)
	if len(l.s) > 2*maxLog {
		// Trimmed with slack: an append costs O(1), amortized. The copy
		// is the loop's own; what was published stays as it was.
		l.s = slices.Clone(l.s[len(l.s)-maxLog:])
	}
}

// edit applies change to the newest entry ok accepts and reports whether
// there was one. ok reads without the lock: only this loop writes.
func (l *boundedLog[T]) edit(ok func(*T) bool, change func(*T)) bool {
	for i := len(l.s) - 1; i >= 0; i-- {
		if ok(&l.s[i]) {
			l.mu.Lock()
			change(&l.s[i])
			l.mu.Unlock()
			return true
		}
	}
	return false
}

// publish returns the newest maxLog entries for Status.
func (l *boundedLog[T]) publish() []T {
	return slices.Clip(l.s[max(0, len(l.s)-maxLog):])
}

func (l *statusLogs) admission(a AdmissionLog) { l.admissions.add(a) }

// admissionErr records the authority's refusal of an acceptance.
func (l *statusLogs) admissionErr(k itemKey, offerID string, err error) {
	l.admissions.edit(func(a *AdmissionLog) bool {
		return a.GroupID == k.group && a.WorkItemID == k.id && a.OfferID == offerID
	}, func(a *AdmissionLog) { a.Err = err.Error() })
}

func (l *statusLogs) selection(s SelectionLog) { l.selections.add(s) }

func (l *statusLogs) preempt(k itemKey, forID, reason string, b scheduler.SelectionBasis, now time.Time) {
	if l.m != nil {
		l.m.preemptions.WithLabelValues(reason).Inc()
	}
	l.preemptions.add(PreemptionLog{GroupID: k.group, WorkItemID: k.id, For: forID, Reason: reason, Basis: b, At: now})
}

// preemptRefused marks the item's last preemption as refused.
func (l *statusLogs) preemptRefused(k itemKey, now time.Time) {
	l.preemptions.edit(func(p *PreemptionLog) bool { return p.GroupID == k.group && p.WorkItemID == k.id },
		func(p *PreemptionLog) { p.RefusedAt = &now })
}

func (l *statusLogs) outcome(o OutcomeLog) { l.outcomes.add(o) }

// sent records the authority's answer to an outcome's command.
func (l *statusLogs) sent(k itemKey, typ string, err error) {
	l.outcomes.edit(func(o *OutcomeLog) bool {
		return o.GroupID == k.group && o.WorkItemID == k.id && (o.Sent == typ || o.Sent == "held until reconciled")
	}, func(o *OutcomeLog) {
		o.Sent = typ
		if err != nil {
			o.Err = err.Error()
		}
	})
}

// decided records what the worker did about a refused command of an
// outcome.
func (l *statusLogs) decided(k itemKey, typ, decision string) {
	l.outcomes.edit(func(o *OutcomeLog) bool { return o.GroupID == k.group && o.WorkItemID == k.id && o.Sent == typ },
		func(o *OutcomeLog) { o.Decision = decision })
}

func (l *statusLogs) notice(n NoticeLog) { l.notices.add(n) }

// noticeState records how a notice was settled.
func (l *statusLogs) noticeState(messageID, state, why string) {
	l.notices.edit(func(n *NoticeLog) bool { return n.MessageID == messageID && n.State != noticeSkipped },
		func(n *NoticeLog) { n.State, n.Err = state, why })
}

func (l *statusLogs) addReconciled(r []ReconcileLog) { l.reconciled.add(r...) }

// publishStatus copies the loop's state into the Worker's status.
func (e *engine) publishStatus() {
	st := WorkerStatus{
		AgentID: e.cfg.AgentID, SessionEpoch: e.sess.epoch, Connection: e.connState.String(), Offline: e.mon.State().String(),
		Slots: int(e.cfg.Card.MaxConcurrency), FreeSlots: e.pool.Free(),
		Admissions: e.log_.admissions.publish(), Selections: e.log_.selections.publish(),
		Preemptions: e.log_.preemptions.publish(), Outcomes: e.log_.outcomes.publish(),
		Reconciled: e.log_.reconciled.publish(), Notices: e.log_.notices.publish(),
	}
	st.Queued, _ = e.sched.Len()
	counts := map[string]int{}
	for _, it := range e.items {
		counts[it.key.group]++
		if it.Phase == phRunning {
			st.Running = append(st.Running, RunStatus{GroupID: it.key.group, WorkItemID: it.key.id, Slot: it.slot,
				LeaseID: it.LeaseID, LeaseExpiresAt: it.Expires, Renewals: it.renewals, Attempt: it.attempt})
		}
	}
	slices.SortFunc(st.Running, func(a, b RunStatus) int { return a.Slot - b.Slot })
	for _, c := range e.store.Cursors() {
		gs := GroupStatus{GroupID: c.GroupID, Cursor: c.Sequence, Items: counts[c.GroupID]}
		if m, ok := e.store.Mission(c.GroupID); ok {
			gs.PriorityClass = m.PriorityClass
		}
		if d, ok := e.store.Divergence(c.GroupID); ok {
			gs.Diverged = &d
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
	running := map[string]bool{}
	for i := range st.Running {
		r := &st.Running[i]
		running[r.LeaseID] = true
		r.Attempt = max(r.Attempt, e.w.attempts[r.LeaseID])
	}
	for lease := range e.w.attempts {
		if !running[lease] {
			delete(e.w.attempts, lease)
		}
	}
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
