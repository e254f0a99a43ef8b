package queue

import (
	"maps"
	"slices"

	"github.com/missionweave/mwp-worker/protocol"
)

// groupState is the in-memory copy of one Group's durable state plus its
// reorder buffer. Only Apply, Rebuild and RestoreSnapshot change it, and only
// after their transaction committed.
type groupState struct {
	id      string
	cursor  uint64 // highest contiguous sequence durably applied
	base    uint64 // the inbox holds sequences above base (0, or the snapshot's)
	snapRef *protocol.SnapshotRef
	mis     MissionView
	members map[string]Member // by memberKey
	items   map[string]*Entry
	deps    map[string][]string // prerequisite id → ids of items naming it
	buf     reorderBuffer
	recent  idWindow // the last applied eventIds
	// diverged is set once the authority contradicted an applied event;
	// nothing more of the Group is applied.
	diverged *Divergence
	// pruneCheck is the cursor before which the inbox is not looked at
	// for pruning again (prunePoint); memory only.
	pruneCheck uint64
}

func newGroupState(id string) *groupState {
	return &groupState{id: id, items: make(map[string]*Entry), deps: make(map[string][]string), members: make(map[string]Member)}
}

func (g *groupState) item(id string) *Entry         { return g.items[id] }
func (g *groupState) owns(*Entry) bool              { return false }
func (g *groupState) mission() MissionView          { return g.mis }
func (g *groupState) dependents(id string) []string { return g.deps[id] }

func (g *groupState) itemIDs() []string {
	return slices.Sorted(maps.Keys(g.items))
}

// index adds e's dependencies to the dependents index.
func (g *groupState) index(e *Entry) {
	for _, d := range e.Dependencies {
		if !slices.Contains(g.deps[d.WorkItemID], e.WorkItemID) {
			g.deps[d.WorkItemID] = append(g.deps[d.WorkItemID], e.WorkItemID)
		}
	}
}

// overlay layers one transaction's changes over a groupState, so events of
// the same batch see each other's effects while the groupState stays as
// committed until merge.
type overlay struct {
	g       *groupState
	items   map[string]*Entry
	mis     *MissionView
	members map[string]Member   // changed memberships, by memberKey
	deps    map[string][]string // additions to g.deps
	created []string
	// private is set when no one but the overlay's user sees its entries
	// until merge (replay): steps then change them in place. Apply's
	// entries are read by others once recorded, so it copies them.
	private bool
}

func newOverlay(g *groupState) *overlay {
	return &overlay{g: g, items: make(map[string]*Entry)}
}

func (o *overlay) item(id string) *Entry {
	if e, ok := o.items[id]; ok {
		return e
	}
	return o.g.items[id]
}

func (o *overlay) owns(e *Entry) bool {
	return o.private && o.items[e.WorkItemID] == e
}

func (o *overlay) mission() MissionView {
	if o.mis != nil {
		return *o.mis
	}
	return o.g.mis
}

func (o *overlay) dependents(id string) []string {
	a, b := o.g.deps[id], o.deps[id]
	if len(b) == 0 {
		return a
	}
	return append(slices.Clip(a), b...)
}

func (o *overlay) itemIDs() []string {
	ids := make([]string, 0, len(o.g.items)+len(o.created))
	for id := range o.g.items {
		ids = append(ids, id)
	}
	ids = append(ids, o.created...)
	slices.Sort(ids)
	return ids
}

// record takes one step's change into the overlay.
func (o *overlay) record(c change) {
	if c.mission != nil {
		m := *c.mission
		o.mis = &m
	}
	for _, m := range c.members {
		if o.members == nil {
			o.members = make(map[string]Member)
		}
		o.members[memberKey(m.Principal)] = m
	}
	for _, e := range c.items {
		if _, ok := o.items[e.WorkItemID]; !ok && o.g.items[e.WorkItemID] == nil {
			o.created = append(o.created, e.WorkItemID)
		}
		o.items[e.WorkItemID] = e
		for _, d := range e.Dependencies {
			if slices.Contains(o.g.deps[d.WorkItemID], e.WorkItemID) || slices.Contains(o.deps[d.WorkItemID], e.WorkItemID) {
				continue
			}
			if o.deps == nil {
				o.deps = make(map[string][]string)
			}
			o.deps[d.WorkItemID] = append(o.deps[d.WorkItemID], e.WorkItemID)
		}
	}
}

// merge makes the overlay's changes the groupState's; call it only after
// the transaction that wrote them committed.
func (o *overlay) merge() {
	for id, e := range o.items {
		o.g.items[id] = e
	}
	for dep, ids := range o.deps {
		o.g.deps[dep] = append(o.g.deps[dep], ids...)
	}
	if o.mis != nil {
		o.g.mis = *o.mis
	}
	for k, m := range o.members {
		o.g.members[k] = m
	}
}

// allMembers is the Group's memberships with the overlay's changes.
func (o *overlay) allMembers() map[string]Member {
	all := maps.Clone(o.g.members)
	if all == nil {
		all = make(map[string]Member)
	}
	maps.Copy(all, o.members)
	return all
}

// changedMembers lists the changed memberships in key order.
func (o *overlay) changedMembers() []Member { return sortedMembers(o.members) }

// changedIDs lists the changed item ids in sorted order.
func (o *overlay) changedIDs() []string {
	return slices.Sorted(maps.Keys(o.items))
}
