package client

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func cmd(id, group string) *pendingCmd {
	return &pendingCmd{actionID: id, groupID: group, signed: []byte(id)}
}

func actionIDs(ps []*pendingCmd) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.actionID
	}
	return out
}

func TestCmdQueueOrderAndPause(t *testing.T) {
	q := newCmdQueue()
	for _, c := range []*pendingCmd{cmd("a1", "a"), cmd("b1", "b"), cmd("a2", "a"), cmd("o1", "")} {
		q.add(c)
	}
	now := t0
	if got := actionIDs(q.sendable(now)); !slices.Equal(got, []string{"a1", "b1", "a2", "o1"}) {
		t.Fatalf("sendable = %v", got)
	}
	q.pause("a", now.Add(time.Minute))
	q.pause("a", now.Add(time.Second)) // never shortens
	if got := actionIDs(q.sendable(now)); !slices.Equal(got, []string{"b1", "o1"}) {
		t.Fatalf("sendable while a is paused = %v", got)
	}
	if w := q.nextWake(); !w.ok || !w.at.Equal(now.Add(time.Minute)) {
		t.Fatalf("nextWake = %+v", w)
	}
	for _, p := range q.sendable(now) {
		q.sent(p, "f-"+p.actionID)
	}
	if got := actionIDs(q.sendable(now.Add(59 * time.Second))); len(got) != 0 {
		t.Fatalf("sendable before the pause ends = %v", got)
	}
	if got := actionIDs(q.sendable(now.Add(time.Minute))); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("sendable when the pause ends = %v", got)
	}
	if w := q.nextWake(); w.ok {
		t.Fatalf("nextWake after the pause = %+v", w)
	}
	p := q.byFrameID("f-b1")
	if p == nil || p.actionID != "b1" {
		t.Fatalf("byFrameID = %+v", p)
	}
	q.remove(p)
	if q.byFrameID("f-b1") != nil || slices.Contains(actionIDs(q.list), "b1") {
		t.Fatal("removed Command still known")
	}
	// A retryable error: unsent again, behind its Group's pause.
	o := q.byFrameID("f-o1")
	q.pause("", now.Add(2*time.Minute))
	q.retry(o)
	if q.byFrameID("f-o1") != nil || slices.Contains(actionIDs(q.sendable(now.Add(time.Minute))), "o1") {
		t.Fatal("retried Command sendable before its pause ends")
	}
	if !slices.Contains(actionIDs(q.sendable(now.Add(2*time.Minute))), "o1") {
		t.Fatal("retried Command not sendable after its pause")
	}
}

func TestCmdQueueSyncKeepsWaitersAndOrder(t *testing.T) {
	q := newCmdQueue()
	w := make(chan cmdResult, 1)
	a := cmd("a", "g")
	a.waiters = []chan cmdResult{w}
	q.add(a)
	q.add(cmd("answered-by-event", "g")) // no longer in the outbox
	q.sent(a, "f-1")
	dup := cmd("a", "g")
	dup.waiters = []chan cmdResult{make(chan cmdResult, 1)}
	if q.add(dup) {
		t.Fatal("same actionId added twice")
	}
	// The outbox after a restart of the connection: an older entry first.
	q.sync([]*pendingCmd{cmd("old", "g"), cmd("a", "g"), cmd("a", "g")})
	if got := actionIDs(q.list); !slices.Equal(got, []string{"old", "a", "answered-by-event"}) {
		t.Fatalf("after sync: %v", got)
	}
	na := q.byAction["a"]
	if len(na.waiters) != 2 || na.frameID != "" || q.byFrameID("f-1") != nil {
		t.Fatalf("after sync a = %+v", na)
	}
	q.failAll(ErrNotRunning)
	if r := <-w; r.err != ErrNotRunning {
		t.Fatalf("waiter got %+v", r)
	}
}

func TestPinger(t *testing.T) {
	p := newPinger(10*time.Second, 3*time.Second, t0)
	steps := []struct {
		at      time.Duration
		due     bool
		expired bool
	}{{0, false, false}, {9 * time.Second, false, false}, {10 * time.Second, true, false}}
	for _, s := range steps {
		if p.due(t0.Add(s.at)) != s.due || p.expired(t0.Add(s.at)) != s.expired {
			t.Fatalf("at %v: due %v expired %v", s.at, p.due(t0.Add(s.at)), p.expired(t0.Add(s.at)))
		}
	}
	if w := p.next(); !w.at.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next = %v", w.at)
	}
	p.sent("n1", t0.Add(10*time.Second))
	if p.due(t0.Add(time.Hour)) {
		t.Fatal("a second PING while one is outstanding")
	}
	if w := p.next(); !w.at.Equal(t0.Add(13 * time.Second)) {
		t.Fatalf("next while outstanding = %v", w.at)
	}
	if p.expired(t0.Add(13*time.Second - 1)) {
		t.Fatal("expired before the timeout")
	}
	if !p.expired(t0.Add(13 * time.Second)) {
		t.Fatal("not expired at the timeout")
	}
	if p.echo("other") {
		t.Fatal("foreign nonce accepted")
	}
	if !p.echo("n1") || p.expired(t0.Add(time.Hour)) || p.echo("n1") {
		t.Fatal("echo did not clear the outstanding PING exactly once")
	}
	if !p.due(t0.Add(20 * time.Second)) {
		t.Fatal("next PING not due an interval after the last")
	}
	off := newPinger(-1, time.Second, t0)
	if off.due(t0.Add(time.Hour)) || off.next().ok {
		t.Fatal("disabled pinger pings")
	}
}

func TestGapTracker(t *testing.T) {
	g := newGapTracker(2 * time.Second)
	g.update([]string{"a", "b"}, map[string]bool{"a": true}, t0)
	g.update([]string{"a"}, map[string]bool{"a": true}, t0.Add(time.Second)) // still waiting: keeps t0
	if due := g.due(t0.Add(2*time.Second - 1)); len(due) != 0 {
		t.Fatalf("due early: %v", due)
	}
	if due := g.due(t0.Add(2 * time.Second)); !slices.Equal(due, []string{"a"}) {
		t.Fatalf("due = %v", due)
	}
	if due := g.due(t0.Add(3 * time.Second)); len(due) != 0 {
		t.Fatalf("due again before a new timeout: %v", due)
	}
	g.update([]string{"a"}, nil, t0.Add(3*time.Second)) // filled
	if w := g.next(); w.ok {
		t.Fatalf("next after the gap filled = %+v", w)
	}
	g.retry("c", t0)
	if w := g.next(); !w.ok || !w.at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("next after retry = %+v", w)
	}
	g.forget("c")
	if w := g.next(); w.ok {
		t.Fatal("forgotten Group still tracked")
	}
}

// TestCmdQueueProperties drives the queue with random operations against a
// plain model: every unanswered Command stays queued in put order; nothing
// of a paused Group is ever sendable; within a Group, Commands become
// sendable in put order; a Command has at most one live frame.
func TestCmdQueueProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := newCmdQueue()
		groups := []string{"", "a", "b"}
		var model []string // unanswered, in put order
		groupOf := map[string]string{}
		pausedUntil := map[string]time.Time{}
		now := t0
		next := 0
		frames := 0
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				g := rapid.SampledFrom(groups).Draw(t, "group")
				id := fmt.Sprintf("act-%d", next)
				next++
				q.add(cmd(id, g))
				model = append(model, id)
				groupOf[id] = g
			},
			"send": func(t *rapid.T) {
				for _, p := range q.sendable(now) {
					frames++
					q.sent(p, fmt.Sprintf("f-%d", frames))
				}
			},
			"answer": func(t *rapid.T) {
				var sent []*pendingCmd
				for _, p := range q.list {
					if p.frameID != "" {
						sent = append(sent, p)
					}
				}
				if len(sent) == 0 {
					t.Skip("nothing in flight")
				}
				p := rapid.SampledFrom(sent).Draw(t, "answered")
				if q.byFrameID(p.frameID) != p {
					t.Fatalf("frame %s does not map to %s", p.frameID, p.actionID)
				}
				q.remove(p)
				model = slices.DeleteFunc(model, func(id string) bool { return id == p.actionID })
			},
			"retryable error": func(t *rapid.T) {
				for _, p := range q.list {
					if p.frameID != "" {
						until := now.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "s")) * time.Second)
						q.pause(p.groupID, until)
						if until.After(pausedUntil[p.groupID]) {
							pausedUntil[p.groupID] = until
						}
						q.retry(p)
						return
					}
				}
			},
			"backpressure": func(t *rapid.T) {
				g := rapid.SampledFrom(groups[1:]).Draw(t, "group")
				until := now.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "s")) * time.Second)
				q.pause(g, until)
				if until.After(pausedUntil[g]) {
					pausedUntil[g] = until
				}
			},
			"time passes": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "s")) * time.Second)
			},
			"reconnect": func(t *rapid.T) {
				var ob []*pendingCmd
				for _, id := range model {
					if rapid.Bool().Draw(t, "in outbox") {
						ob = append(ob, cmd(id, groupOf[id]))
					}
				}
				q.sync(ob)
				// Outbox entries first, the rest after, each in put order.
				var want []string
				for _, p := range ob {
					want = append(want, p.actionID)
				}
				for _, id := range model {
					if !slices.Contains(want, id) {
						want = append(want, id)
					}
				}
				model = want
			},
			"": func(t *rapid.T) {
				if got := actionIDs(q.list); !slices.Equal(got, model) {
					t.Fatalf("queue %v, model %v", got, model)
				}
				seen := map[string]bool{}
				lastSent := map[string]int{}
				for _, p := range q.sendable(now) {
					if until, ok := pausedUntil[p.groupID]; ok && now.Before(until) {
						t.Fatalf("%s sendable while group %q is paused", p.actionID, p.groupID)
					}
					if seen[p.actionID] {
						t.Fatalf("%s sendable twice", p.actionID)
					}
					seen[p.actionID] = true
					if j, ok := lastSent[p.groupID]; ok && slices.Index(model, p.actionID) < j {
						t.Fatalf("group %q out of order", p.groupID)
					}
					lastSent[p.groupID] = slices.Index(model, p.actionID)
				}
				for f, p := range q.byFrame {
					if p.frameID != f || q.byAction[p.actionID] != p {
						t.Fatalf("frame index stale for %s", f)
					}
				}
			},
		})
	})
}
