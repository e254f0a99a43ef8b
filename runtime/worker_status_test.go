package runtime

import (
	"slices"
	"sync"
	"testing"
)

// The loop appends, trims and edits a log while a reader copies what was
// published, as Status does. Under -race this fails if an edit changes an
// entry outside the lock the reader copies under.
func TestBoundedLogEditsUnderTheReadersLock(t *testing.T) {
	var mu sync.Mutex
	l := boundedLog[OutcomeLog]{mu: &mu}
	var published []OutcomeLog
	publish := func() {
		p := l.publish()
		mu.Lock()
		published = p
		mu.Unlock()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			mu.Lock()
			snap := slices.Clone(published)
			mu.Unlock()
			for _, o := range snap {
				_ = o.Sent
			}
		}
	})
	for i := range 3 * maxLog {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		l.add(OutcomeLog{WorkItemID: id})
		publish()
		if !l.edit(func(o *OutcomeLog) bool { return o.WorkItemID == id }, func(o *OutcomeLog) { o.Sent = "work.submit" }) {
			t.Fatalf("edit found no entry %s", id)
		}
	}
	close(done)
	wg.Wait()
	if n := len(l.publish()); n != maxLog {
		t.Fatalf("published %d entries, want %d", n, maxLog)
	}
	for _, o := range l.publish() {
		if o.Sent != "work.submit" {
			t.Fatalf("entry %s not edited: %+v", o.WorkItemID, o)
		}
	}
}

// An edit reaches the newest entry that matches, a missing one reports
// false, and an entry appended after a publish is not in what was published.
func TestBoundedLogEditAndPublish(t *testing.T) {
	var mu sync.Mutex
	l := boundedLog[NoticeLog]{mu: &mu}
	l.add(NoticeLog{MessageID: "m1"}, NoticeLog{MessageID: "m2"}, NoticeLog{MessageID: "m1"})
	before := l.publish()
	l.add(NoticeLog{MessageID: "m3"})
	if len(before) != 3 {
		t.Fatalf("published %d entries before the append, want 3", len(before))
	}
	if !l.edit(func(n *NoticeLog) bool { return n.MessageID == "m1" }, func(n *NoticeLog) { n.State = "posted" }) {
		t.Fatal("no m1 to edit")
	}
	if got := l.publish(); got[0].State != "" || got[2].State != "posted" {
		t.Fatalf("edit changed %+v, want only the newest m1", got)
	}
	if l.edit(func(n *NoticeLog) bool { return n.MessageID == "m9" }, func(*NoticeLog) { t.Fatal("changed an entry that did not match") }) {
		t.Fatal("edit reported an entry it did not find")
	}
}
