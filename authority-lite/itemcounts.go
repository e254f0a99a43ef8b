package authoritylite

import (
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// itemClass is what the counted limits (countsFor) see of one WorkItem.
type itemClass struct {
	open, active, queued, clarifying bool
	key                              string // decompositionKey, when open
}

func classify(w *group.WorkItem) itemClass {
	if w == nil || terminal(w.State) {
		return itemClass{}
	}
	return itemClass{
		open:       true,
		active:     w.State == protocol.WorkActive,
		queued:     w.State == protocol.WorkQueued,
		clarifying: w.State == protocol.WorkBlocked && w.Blocker != nil && w.Blocker.Kind == protocol.ResolutionClarification,
		key:        decompositionKey(w.Contract),
	}
}

// itemCounts keeps countsFor's counts as WorkItems change, so checking a
// command against a limit visits the WorkItems its decision touched, not
// every WorkItem the Group ever had.
type itemCounts struct {
	class                            map[string]itemClass
	open, active, queued, clarifying int
	openByKey                        map[string]int
}

func newItemCounts() itemCounts {
	return itemCounts{class: map[string]itemClass{}, openByKey: map[string]int{}}
}

// count rebuilds the counts from every WorkItem.
func (c *itemCounts) count(items map[string]*group.WorkItem) {
	*c = newItemCounts()
	for id, w := range items {
		c.set(id, classify(w))
	}
}

// touch reclassifies the WorkItems drafts name, after their decision.
func (c *itemCounts) touch(items map[string]*group.WorkItem, drafts []group.EventDraft) {
	for _, d := range drafts {
		if d.Aggregate.Kind == protocol.AggregateWorkItem {
			c.set(d.Aggregate.ID, classify(items[d.Aggregate.ID]))
		}
	}
}

func (c *itemCounts) set(id string, now itemClass) {
	was := c.class[id]
	if was == now {
		return
	}
	c.add(was, -1)
	c.add(now, 1)
	if now == (itemClass{}) {
		delete(c.class, id)
	} else {
		c.class[id] = now
	}
}

func (c *itemCounts) add(cl itemClass, d int) {
	if !cl.open {
		return
	}
	c.open += d
	c.active += b2i(cl.active) * d
	c.queued += b2i(cl.queued) * d
	c.clarifying += b2i(cl.clarifying) * d
	if c.openByKey[cl.key] += d; c.openByKey[cl.key] == 0 {
		delete(c.openByKey, cl.key)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
